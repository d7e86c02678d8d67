// The negative tests' program: the three broken variants of raw_data_parallel, each of which
// `verify` must fail (CMakeLists.txt says how).
#include <memory>
#include <shardcheck/cli.hpp>

#include "broken_variants.hpp"

int main(int argc, char** argv) {
  shardcheck::par::registry broken;
  broken.add(std::make_unique<mylab::extra_allreduce>());
  broken.add(std::make_unique<mylab::skips_allgatherv>());
  broken.add(std::make_unique<mylab::copies_w>());
  return shardcheck::cli_main(argc, argv, std::move(broken));
}
