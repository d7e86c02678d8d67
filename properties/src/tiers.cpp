#include "shardcheck/properties/verdict.hpp"

#include <cstdint>
#include <string>

#include "shardcheck/reference/data.hpp"

// Which tier judges a case: functions of the case alone, apart from verdict.cpp so that the
// footprint (footprint.cpp) can ask them without the judge.

namespace shardcheck::prop {

bool data_aware_applies(const par::run_case& c, bool partial_inputs) {
  return !partial_inputs && !is_storage16(c.prob.type) && c.prob.layers() == 1 &&
         ref::signs_symmetric(c.mode);
}

std::string projection_declines(const par::run_case& c) {
  if (c.prob.layers() > 1) return "a stack";
  if (is_storage16(c.prob.type)) return std::string(to_string(c.prob.type)) + " storage";
  if (c.mode == value_mode::exact) return "exact mode";
  return {};
}

bool judged_by_projection(const par::run_case& c) {
  if (c.check == par::check_method::reference || !projection_declines(c).empty()) return false;
  if (c.check == par::check_method::projection) return true;
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  return d(c.prob.M) * d(c.prob.N) * d(c.prob.K) > projection_threshold;
}

}  // namespace shardcheck::prop
