// The negative tests' program: the three broken adapters, each of which `verify` must fail
// (CMakeLists.txt says how).
#include <memory>
#include <shardcheck/cli.hpp>

#include "broken_variants.hpp"

int main(int argc, char** argv) {
  shardcheck::par::registry broken;
  broken.add(std::make_unique<mylab::wrong_source>());
  broken.add(std::make_unique<mylab::mislabelled_lld>());
  broken.add(std::make_unique<mylab::forgets_work_array>());
  return shardcheck::cli_main(argc, argv, std::move(broken));
}
