// libFuzzer target: placements and layouts as text, e.g. "S(0),On(2),R" (placement.hpp). An
// accepted layout prints back to a text that parses to the same layout, one placement per comma.
#include "fuzz_check.hpp"
#include "shardcheck/parallel/placement.hpp"
#include "shardcheck/reference/types.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck;
  using fuzz::require;
  const std::string_view in = fuzz::text(data, size);
  try {
    const par::placement one = par::placement::parse(in);
    require(par::placement::parse(one.to_string()) == one, "a placement prints back to itself");
  } catch (const error&) {
  }
  try {
    const par::layout l = par::parse_layout(in);
    require(!l.empty(), "a layout has a placement");
    const std::string printed = par::to_string(l);
    require(par::parse_layout(printed) == l, "a layout prints back to itself");
    for (const par::placement& p : l)
      require(par::placement::parse(p.to_string()) == p, "each placement prints back to itself");
  } catch (const error&) {
  }
  return 0;
}
