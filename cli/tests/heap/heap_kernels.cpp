// Kernels for the tests of the C allocation API's metering (memory.hpp): each is data_parallel
// with the same claims, and its forward pass first allocates with malloc, on every rank:
//   heap_at_bound    a block of exactly the forward bound (passes `memory`: a peak at the bound)
//   heap_over_bound  a block one byte above it (fails `memory`)
//   heap_in_mpi      bound/8 blocks' lengths and displacements (8 bytes a block: within the
//                    bound), from which MPI builds a derived datatype (MPI_Type_indexed,
//                    MPI_Type_commit, MPI_Type_free) whose description takes several times the
//                    bound: MPI's, counted apart, so `memory` passes, and the replay line's
//                    verdict shows it. Built without shardcheck::pmpi
//                    (heap_kernels_unmarked) nothing marks those calls as MPI's and `memory`
//                    fails.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <shardcheck/cli.hpp>

namespace sc = shardcheck::par;

namespace {

enum class use { at_bound, over_bound, in_mpi };

// Where the compiler must assume a block is read, so that malloc and free are not elided.
void* volatile escaped = nullptr;

class heap_user final : public sc::kernel {
 public:
  heap_user(const sc::kernel& inner, std::string name, use u) : inner_(inner), use_(u) {
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
  // The harness asks for the claims of a case right before running it: its forward bound is kept
  // for forward, which may not allocate to find it (that would count towards its peak).
  [[nodiscard]] sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    sc::claims cl = inner_.cost(c, coords);
    bound_ = cl.peak ? cl.peak->forward : 0;
    return cl;
  }
  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    const std::int64_t bound = bound_;
    if (use_ == use::in_mpi) {
      allocate_in_mpi(bound);
    } else {
      const auto bytes = static_cast<std::size_t>(bound + (use_ == use::over_bound ? 1 : 0));
      void* block = std::malloc(bytes);
      if (block == nullptr) throw std::bad_alloc();
      std::memset(block, 1, bytes);
      escaped = block;
      std::free(block);
    }
    inner_.forward(ctx, c, io);
  }
  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    inner_.backward(ctx, c, io);
  }

 private:
  // n = bound/8 blocks: the kernel's arguments are 8n bytes, within the bound; Open MPI's
  // description of the type takes tens of bytes per block, far above it.
  static void allocate_in_mpi(std::int64_t bound) {
    const auto blocks = static_cast<std::size_t>(bound / 8 > 0 ? bound / 8 : 1);
    std::vector<int> lengths(blocks, 1), displs(blocks);
    for (std::size_t i = 0; i < blocks; ++i) displs[i] = static_cast<int>(3 * i + i % 2);
    MPI_Datatype t = MPI_DATATYPE_NULL;
    MPI_Type_indexed(static_cast<int>(blocks), lengths.data(), displs.data(), MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    MPI_Type_free(&t);
  }
  const sc::kernel& inner_;
  sc::kernel_info info_;
  use use_;
  mutable std::int64_t bound_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  static const sc::registry builtin = sc::builtin_strategies();
  const sc::kernel& base = *builtin.find("data_parallel");
  sc::registry mine;
  mine.add(std::make_unique<heap_user>(base, "heap_at_bound", use::at_bound));
  mine.add(std::make_unique<heap_user>(base, "heap_over_bound", use::over_bound));
  mine.add(std::make_unique<heap_user>(base, "heap_in_mpi", use::in_mpi));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
