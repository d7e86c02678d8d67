// libFuzzer target: partitions, as `part.D=` values and the balanced split. The input is
// "n:p:sizes", e.g. "7:3:3,0,4": partition::balanced(n, p) and partition::parse("3,0,4") (either
// half may be malformed; a field that is no integer skips the balanced split). Invariants of a
// partition that is accepted: its parts tile 0 … length − 1 in order (offsets are sums), owner(i)
// holds i, the printed form parses back to it; a balanced split has p parts of n/p or n/p + 1.
#include <charconv>
#include <string_view>

#include "fuzz_check.hpp"
#include "shardcheck/parallel/partition.hpp"
#include "shardcheck/reference/types.hpp"

namespace {
using shardcheck::fuzz::require;
using shardcheck::par::partition;

void check(const partition& p) {
  require(p.parts() >= 1 && p.offset(0) == 0, "a partition starts at 0");
  std::int64_t sum = 0;
  for (int r = 0; r < p.parts(); ++r) {
    require(p.size(r) >= 0 && p.offset(r) == sum, "offsets are the sums of the sizes before");
    sum += p.size(r);
  }
  require(sum == p.length(), "the length is the sum of the sizes");
  require(partition::parse(p.to_string()) == p, "a printed partition parses back to itself");
  if (p.length() == 0) return;
  for (const std::int64_t i : {std::int64_t{0}, p.length() / 2, p.length() - 1}) {
    const int r = p.owner(i);
    require(p.size(r) > 0 && p.offset(r) <= i && i - p.offset(r) < p.size(r), "owner(i) holds i");
  }
  for (const std::int64_t scale : {std::int64_t{0}, std::int64_t{3}, p.length()}) {
    try {
      const auto scaled = p.scaled(scale);
      for (int r = 0; r < p.parts(); ++r)
        require(scaled[static_cast<std::size_t>(r)] == p.size(r) * scale, "scaled sizes");
    } catch (const shardcheck::error&) {  // a product past 64 bits, refused
    }
  }
}

template <class I>
bool integer(std::string_view s, I& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = shardcheck::fuzz::text(data, size);
  const std::size_t a = in.find(':');
  const std::size_t b = a == std::string_view::npos ? a : in.find(':', a + 1);
  const std::string_view sizes = b == std::string_view::npos ? in : in.substr(b + 1);
  std::int64_t n = 0;
  int p = 0;
  if (b != std::string_view::npos && integer(in.substr(0, a), n) &&
      integer(in.substr(a + 1, b - a - 1), p)) {
    try {
      const partition bal = partition::balanced(n, p);
      require(bal.parts() == p && bal.length() == n, "a balanced split has p parts and length n");
      for (int r = 0; r < p; ++r)
        require(bal.size(r) == n / p + (r < n % p ? 1 : 0),
                "balanced: the first n mod p get one more");
      check(bal);
    } catch (const shardcheck::error&) {
    }
  }
  try {
    check(partition::parse(sizes));
  } catch (const shardcheck::error&) {
  }
  return 0;
}
