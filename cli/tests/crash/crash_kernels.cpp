// Kernels that die, for the tests of what a dying run says (last_words.hpp): each is
// data_parallel with one fault in its forward pass, on the last rank of the case.
//   crash_segv   writes through a null pointer (SIGSEGV)
//   crash_abort  calls std::abort (SIGABRT)
//   crash_fpe    raises SIGFPE
//   sleeps       sleeps for a minute, so that a test can interrupt the run mid-case
//   mpi_abort    calls MPI_Abort(comm, 1), as a library giving up would
//   mpi_abort_leader  the same on rank 0 of the case instead of the last
//   crash_empty_shard writes through a null pointer on every rank whose share of X's rows is
//                     empty (any rank, any p: M < p, or an uneven partition), for `shrink`
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <shardcheck/cli.hpp>

namespace sc = shardcheck::par;

namespace {

enum class fault { segv, abort, fpe, sleep, mpi_abort, mpi_abort_leader, empty_shard };

class dying final : public sc::kernel {
 public:
  dying(const sc::kernel& inner, std::string name, fault f) : inner_(inner), fault_(f) {
    info_ = inner.info();
    info_.name = std::move(name);
  }
  [[nodiscard]] const sc::kernel_info& info() const override { return info_; }
  [[nodiscard]] std::vector<int> mesh_dims(const sc::run_case& c) const override {
    return inner_.mesh_dims(c);
  }
  [[nodiscard]] sc::layout placement(sc::tensor_slot t, const sc::run_case& c) const override {
    return inner_.placement(t, c);
  }
  [[nodiscard]] sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    return inner_.cost(c, coords);
  }
  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    const int rank = ctx.grid.all().rank();
    if (fault_ == fault::empty_shard ? c.part("M").size(rank) == 0
                                     : rank == (fault_ == fault::mpi_abort_leader ? 0 : c.p - 1))
      die(ctx.grid.all().native_handle());
    inner_.forward(ctx, c, io);
  }
  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    inner_.backward(ctx, c, io);
  }

 private:
  void die(MPI_Comm comm) const {
    switch (fault_) {
      case fault::segv:
      case fault::empty_shard: {
        volatile int* nowhere = nullptr;
        *nowhere = 1;
        break;
      }
      case fault::abort: std::abort();
      case fault::fpe: std::raise(SIGFPE); break;
      case fault::sleep: std::this_thread::sleep_for(std::chrono::seconds(60)); break;
      case fault::mpi_abort:
      case fault::mpi_abort_leader: MPI_Abort(comm, 1); break;
    }
  }
  const sc::kernel& inner_;
  sc::kernel_info info_;
  fault fault_;
};

}  // namespace

int main(int argc, char** argv) {
  static const sc::registry builtin = sc::builtin_strategies();
  const sc::kernel& base = *builtin.find("data_parallel");
  sc::registry mine;
  mine.add(std::make_unique<dying>(base, "crash_segv", fault::segv));
  mine.add(std::make_unique<dying>(base, "crash_abort", fault::abort));
  mine.add(std::make_unique<dying>(base, "crash_fpe", fault::fpe));
  mine.add(std::make_unique<dying>(base, "sleeps", fault::sleep));
  mine.add(std::make_unique<dying>(base, "mpi_abort", fault::mpi_abort));
  mine.add(std::make_unique<dying>(base, "mpi_abort_leader", fault::mpi_abort_leader));
  mine.add(std::make_unique<dying>(base, "crash_empty_shard", fault::empty_shard));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
