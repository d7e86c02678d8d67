// A library set up once per process (registry::set_process_hooks), for the tests of
// process_hooks: `init` counts its calls and checks that MPI is up and returns errors on
// MPI_COMM_WORLD; the kernel (data_parallel, renamed `hooked`) fails its case unless `init` ran
// exactly once and `finalize` not yet; `finalize` checks MPI is still up and prints one line per
// process:
//   hooks: rank 1: init 1, finalize 1, MPI up, errors return
// Built twice: MPI initialised by shardcheck (hooks_kernels), and by the program before cli_main
// as a library's initialisation would (hooks_kernels_mpi_first, with MPI_ERRORS_ARE_FATAL, MPI's
// default, until shardcheck sets MPI_ERRORS_RETURN).
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <shardcheck/cli.hpp>

namespace sc = shardcheck::par;

namespace {

int inits = 0, finalizes = 0;
bool errors_return = false;

class hooked final : public sc::kernel {
 public:
  explicit hooked(const sc::kernel& inner) : inner_(inner) {
    info_ = inner.info();
    info_.name = "hooked";
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
    if (inits != 1 || finalizes != 0)
      throw std::runtime_error("the library is not set up: init ran " + std::to_string(inits) +
                               " times, finalize " + std::to_string(finalizes));
    inner_.forward(ctx, c, io);
  }
  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    inner_.backward(ctx, c, io);
  }

 private:
  const sc::kernel& inner_;
  sc::kernel_info info_;
};

bool mpi_up() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  return initialised != 0 && finalised == 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef HOOKS_MPI_FIRST
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
#endif
  static const sc::registry builtin = sc::builtin_strategies();
  sc::registry mine;
  mine.add(std::make_unique<hooked>(*builtin.find("data_parallel")));
  mine.set_process_hooks({[](int&, char**&) {
                            ++inits;
                            if (!mpi_up())
                              throw std::runtime_error("init hook: MPI is not initialised");
                            MPI_Errhandler h = MPI_ERRHANDLER_NULL;
                            MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
                            errors_return = h == MPI_ERRORS_RETURN;
                            if (h != MPI_ERRHANDLER_NULL) MPI_Errhandler_free(&h);
                          },
                          [] {
                            ++finalizes;
                            int rank = -1;
                            if (mpi_up()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
                            std::printf("hooks: rank %d: init %d, finalize %d, %s, %s\n", rank,
                                        inits, finalizes, mpi_up() ? "MPI up" : "MPI down",
                                        errors_return ? "errors return" : "errors are fatal");
                            std::fflush(stdout);
                          }});
  const int code = shardcheck::cli_main(argc, argv, std::move(mine));
#ifdef HOOKS_MPI_FIRST
  MPI_Finalize();
#endif
  return code;
}
