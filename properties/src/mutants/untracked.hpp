#pragma once
// Memory a mutant uses that the memory meter must not see: a fault layer's scratch and a
// decorator's copies of its inputs are the test's, not the kernel's, so they may not push a
// kernel's measured peak over its bound (only the mutants meant for `memory` allocate where the
// meter sees it).
//
//   untracked_vector<double> v(n);    // glibc's __libc_malloc / __libc_free: below the metered
//                                     // malloc (heap_hook.cpp) and operator new, never counted
//   off_meter hide(bytes);            // takes `bytes` off the meter's live count for its
//   par::any_matrix copy = original;  // lifetime: a tracked copy of `bytes` made after it, and
//                                     // freed before it, leaves the peak where it was
#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include "shardcheck/parallel/memory.hpp"

// glibc's own allocator, beneath the metered C allocation API the check program defines.
extern "C" void* __libc_malloc(std::size_t);  // NOLINT(bugprone-reserved-identifier)
extern "C" void __libc_free(void*);           // NOLINT(bugprone-reserved-identifier)

namespace shardcheck::prop::mutants {

template <class T>
struct untracked_allocator {
  using value_type = T;
  untracked_allocator() noexcept = default;
  template <class U>
  untracked_allocator(const untracked_allocator<U>&) noexcept {}
  [[nodiscard]] T* allocate(std::size_t n) {
    void* p = __libc_malloc(n == 0 ? 1 : n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept { __libc_free(p); }
  template <class U>
  bool operator==(const untracked_allocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using untracked_vector = std::vector<T, untracked_allocator<T>>;

// Takes `bytes` off the meter's live count while it lives. \note only for bytes that are live
// (tracked) for its whole lifetime and allocated after it: the copies of inputs the harness holds.
class off_meter {
 public:
  explicit off_meter(std::size_t bytes) noexcept : bytes_(bytes) { mem::on_free(bytes_); }
  ~off_meter() { mem::on_alloc(bytes_); }
  off_meter(const off_meter&) = delete;
  off_meter& operator=(const off_meter&) = delete;

 private:
  std::size_t bytes_;
};

}  // namespace shardcheck::prop::mutants
