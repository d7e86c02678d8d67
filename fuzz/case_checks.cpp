#include "case_checks.hpp"

#include <set>
#include <string>

#include "fuzz_check.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/properties/checks.hpp"
#include "shardcheck/properties/footprint.hpp"

namespace shardcheck::fuzz {

const par::registry& kernels() {
  static const par::registry all = [] {
    par::registry r = par::builtin_strategies();
    prop::add_collective_checks(r);
    return r;
  }();
  return all;
}

void check_case(const par::kernel& k, par::run_case c) {
  try {
    par::complete_and_validate(k, c);
  } catch (const error&) {
    return;
  }
  const std::string printed = c.to_string();
  par::run_case again = par::run_case::parse(printed);
  par::complete_and_validate(k, again);
  require(again.to_string() == printed, "a completed case replays to itself");

  const std::vector<int> dims = k.mesh_dims(c);
  std::set<int> ranks{0, 1, c.p - 1};
  if (c.p <= 4)
    for (int r = 0; r < c.p; ++r) ranks.insert(r);
  for (const int r : ranks) {
    if (r >= c.p) continue;
    const std::vector<int> coords = par::coords_of(r, dims);
    const par::case_plan plan = par::plan_of(k, c, coords);
    for (const par::tensor_plan& t : plan.tensors) {
      const par::block& b = t.region;
      require(b.rows >= 0 && b.cols >= 0 && b.row0 >= 0 && b.col0 >= 0, "a block is no negative");
    }
    (void)k.cost(c, coords);
  }
  if (c.p > 4) return;
  try {
    prop::check_footprint(k, c, std::int64_t{8} << 30);
  } catch (const error&) {  // above the limit, or a footprint past 64 bits: refused
  }
}

}  // namespace shardcheck::fuzz
