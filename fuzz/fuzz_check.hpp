#pragma once
// What the fuzz targets share. An input is text; a refusal is a shardcheck::error (the program's
// "bad usage", exit 2); anything else — a crash, a sanitizer report, another exception escaping
// LLVMFuzzerTestOneInput, a broken invariant — is a finding, and libFuzzer keeps its input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace shardcheck::fuzz {

[[nodiscard]] inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// require(parse(printed).to_string() == printed, "a printed case replays to itself")
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz: broken invariant: %s\n", what);
  std::abort();
}

}  // namespace shardcheck::fuzz
