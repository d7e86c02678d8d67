// The expected failures' program: GA_Dgemm as it is, without the adapter's guards, for the ctest
// entries that show each known defect of Global Arrays 5.8.2 still reproduces (CMakeLists.txt):
//   ga_dgemm.unguarded          takes the cases ga_dgemm declines (a process with no rows, a
//                               dimension of 1024 or more)
//   ga_dgemm.claims_determinism ga_dgemm claiming determinism, which GA does not give
//   ga_dgemm.forgets_buffer     ga_dgemm's memory bound without pnga_matmul's buffer (one
//                               allocation, the ARMCI_Malloc_local of each product): memory fails
//   ga_dgemm.forgets_flush      ga_dgemm's ledger without one entry: the forward's first
//                               MPI_Win_flush_local_all (ARMCI_Wait on GA_Dgemm's first chunk, one
//                               window of the three): ledger fails
#include <ga.h>
#include <macdecls.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <shardcheck/cli.hpp>
#include <span>
#include <stdexcept>

#include "ga_dgemm.hpp"

namespace mylab {
class forgets_buffer final : public ga_dgemm {
 public:
  forgets_buffer() : ga_dgemm("ga_dgemm.forgets_buffer") {}
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    auto out = ga_dgemm::cost(c, coords);
    const std::int64_t e = c.prob.type == shardcheck::dtype::f32 ? 4 : 8;
    out.peak->forward -= matmul_buffer(c.p, e);
    out.peak->backward -= matmul_buffer(c.p, e);
    return out;
  }
};

class forgets_flush final : public ga_dgemm {
 public:
  forgets_flush() : ga_dgemm("ga_dgemm.forgets_flush") {}
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    auto out = ga_dgemm::cost(c, coords);
    if (out.collectives) {
      auto& f = out.collectives->forward;
      const auto first = std::find_if(f.begin(), f.end(), [](const sc::ledger_entry& e) {
        return e.kind == sc::collective::win_flush_local_all;
      });
      if (first != f.end()) f.erase(first);
    }
    return out;
  }
};
}  // namespace mylab

int main(int argc, char** argv) {
  shardcheck::par::registry known;
  known.add(std::make_unique<mylab::ga_dgemm>("ga_dgemm.unguarded", false, false));
  known.add(std::make_unique<mylab::ga_dgemm>("ga_dgemm.claims_determinism", true, true));
  known.add(std::make_unique<mylab::forgets_buffer>());
  known.add(std::make_unique<mylab::forgets_flush>());
  known.set_process_hooks({[](int&, char**&) {
                             GA_Initialize();
                             if (MA_init(C_DBL, 1 << 20, 1 << 20) == 0)
                               throw std::runtime_error("MA_init failed");
                           },
                           [] { GA_Terminate(); }});
  return shardcheck::cli_main(argc, argv, std::move(known));
}
