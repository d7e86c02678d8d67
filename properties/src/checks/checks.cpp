#include "shardcheck/properties/checks.hpp"

#include <memory>

#include "checks/collective_check.hpp"
#include "checks/overlap_check.hpp"

namespace shardcheck::prop {

void add_collective_checks(par::registry& r) {
  r.add(std::make_unique<checks::collective_check>(par::collective::broadcast));
  r.add(std::make_unique<checks::collective_check>(par::collective::all_to_all));
  r.add(std::make_unique<checks::overlap_check>());
}

par::registry collective_checks() {
  par::registry r;
  add_collective_checks(r);
  return r;
}

}  // namespace shardcheck::prop
