#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "mpi_environment.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/memory.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define SHARDCHECK_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDCHECK_UNDER_ASAN 1
#endif
#endif
#ifdef SHARDCHECK_UNDER_ASAN
#include <sanitizer/asan_interface.h>
#endif

using namespace shardcheck;

namespace {
struct alignas(256) wide_block {
  char bytes[300];
};
[[nodiscard]] std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
// Stored where the compiler must assume it is read: a new-expression whose block is never used
// may be elided, and then nothing is counted.
const void* volatile escaped = nullptr;
}  // namespace

TEST(peak_scope, counts_tracked_buffers_at_their_peak) {
  mem::peak_scope scope;
  {
    par::matrix<double> a(10, 10);
    par::matrix<double> b(5, 4);
  }
  par::matrix<float> c(3, 3);
  EXPECT_EQ(scope.peak(), 800u + 160u);
}

TEST(peak_scope, counts_global_new_in_test_binaries) {
  ASSERT_TRUE(mem::global_new_tracked());
  mem::peak_scope scope;
  { std::vector<char> v(12345); }
  EXPECT_EQ(scope.peak(), 12345u);
}

TEST(peak_scope, nested_scopes_keep_the_outer_peak) {
  mem::peak_scope outer;
  { std::vector<char> big(5000); }
  {
    mem::peak_scope inner;
    std::vector<char> small(100);
    EXPECT_EQ(inner.peak(), 100u);
  }
  EXPECT_EQ(outer.peak(), 5000u);
}

// No rounding anywhere: 3×5 doubles are 120 bytes (not 128), 13 chars are 13 bytes, and every byte
// is given back.
TEST(peak_scope, counts_exact_sizes_with_no_rounding) {
  const std::size_t base = mem::live_bytes();
  mem::peak_scope scope;
  {
    par::matrix<double> a(3, 5);
    EXPECT_EQ(mem::live_bytes() - base, 120u);
    par::matrix<float> b(1, 3);
    EXPECT_EQ(mem::live_bytes() - base, 120u + 12u);
  }
  EXPECT_EQ(scope.peak(), 132u);
  {
    mem::peak_scope one;
    const std::unique_ptr<char[]> c(new char[13]);
    escaped = c.get();
    EXPECT_EQ(mem::live_bytes() - base, 13u);
    const std::vector<char> v(1);
    escaped = v.data();
    EXPECT_EQ(one.peak(), 14u);
  }
  EXPECT_EQ(mem::live_bytes(), base);
}

// Exact sizes keep the alignments: malloc's for tracked buffers and plain new, the asked one for
// aligned new (a 300-byte struct aligned to 256 is 512 bytes, counted as such).
TEST(peak_scope, exact_sizes_keep_their_alignment) {
  const par::matrix<double> m(1, 7);
  EXPECT_EQ(address(m.data.data()) % alignof(std::max_align_t), 0u);
  const std::unique_ptr<char[]> c(new char[5]);
  EXPECT_EQ(address(c.get()) % alignof(std::max_align_t), 0u);
  mem::peak_scope scope;
  const auto w = std::make_unique<wide_block>();
  EXPECT_EQ(address(w.get()) % 256, 0u);
  EXPECT_EQ(scope.peak(), sizeof(wide_block));
}

#ifdef SHARDCHECK_UNDER_ASAN
// Under AddressSanitizer the byte right after the user's bytes is outside the block: a tracked
// buffer of 7 doubles, new double[7], an aligned block. So is the header before a new block.
TEST(peak_scope, asan_sees_the_byte_past_every_block) {
  const par::matrix<double> m(1, 7);
  const auto* tracked = reinterpret_cast<const char*>(m.data.data());
  EXPECT_FALSE(__asan_address_is_poisoned(tracked + 55));
  EXPECT_TRUE(__asan_address_is_poisoned(tracked + 56));
  const std::unique_ptr<double[]> d(new double[7]);
  const auto* plain = reinterpret_cast<const char*>(d.get());
  EXPECT_FALSE(__asan_address_is_poisoned(plain + 55));
  EXPECT_TRUE(__asan_address_is_poisoned(plain + 56));
  EXPECT_TRUE(__asan_address_is_poisoned(plain - 1));
  const auto w = std::make_unique<wide_block>();
  const auto* aligned = reinterpret_cast<const char*>(w.get());
  EXPECT_TRUE(__asan_address_is_poisoned(aligned + sizeof(wide_block)));
  EXPECT_TRUE(__asan_address_is_poisoned(aligned - 1));
}
#endif

// The ledger's storage is MPI's wherever it grows. The harness builds the ledger before a case's
// measured scope; a phase that records more calls than the ledger reserved, first from inside a
// recorded MPI call (as the MPI_* wrappers do), then from shardcheck's own code, must leave the
// kernel's peak its own bytes alone. When the reserved block was the kernel's, outgrowing it
// inside a call gave its bytes back to the kernel's meter and read the peak up to 14,336 B low.
TEST(peak_scope, ledger_storage_is_never_the_kernels) {
  par::ledger ledger;
  mem::peak_scope scope;
  std::vector<char> first(1000);
  escaped = first.data();
  {
    const mem::mpi_heap inside_a_recorded_call;
    for (int i = 0; i < 300; ++i) ledger.record(par::send_entry(8, 1, 8), 0);
  }
  for (int i = 0; i < 700; ++i) ledger.record(par::send_entry(8, 1, 8), 0);
  std::vector<char> second(500);
  escaped = second.data();
  EXPECT_EQ(ledger.entries().size(), 1000u);
  EXPECT_EQ(scope.peak(), 1500u);
  EXPECT_GE(scope.mpi_peak(), 1000 * sizeof(par::ledger_entry));
}

// The MPI datatypes of bf16 and f16 and their sum op are made on first use, which may be inside a
// kernel's measured scope (a case's first 16-bit collective). What MPI allocates then, and what it
// frees of its own (registering the keyval that frees them at MPI_Finalize can move MPI's tables),
// is MPI's: at 32 ranks, a bf16 case before an f16 one had MPI free 992 bytes of its own inside
// the f16 case's first forward, whose peak then read 12 bytes below the same run's again, and
// sharded_weights' memory check ("a smaller bucket must never raise the peak") failed.
TEST(peak_scope, sixteen_bit_types_made_on_first_use_are_never_the_kernels) {
  test::need_mpi();
  const std::size_t before = mem::live_bytes();
  mem::peak_scope scope;
  EXPECT_NE(par::mpi_type<half_t>(), MPI_DATATYPE_NULL);
  EXPECT_NE(par::mpi_type<bfloat16_t>(), MPI_DATATYPE_NULL);
  EXPECT_NE(par::sum_op(dtype::f16), MPI_OP_NULL);
  EXPECT_EQ(scope.peak(), 0u);
  EXPECT_EQ(mem::live_bytes(), before);
}
