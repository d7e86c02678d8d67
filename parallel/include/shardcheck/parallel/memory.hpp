#pragma once
// Peak-memory measurement. One process-wide meter counts the bytes of every live allocation made
// through tracking_allocator and, in binaries that link shardcheck::new_hook, through the C
// allocation API (malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc,
// pvalloc, reallocarray) and so through the global operator new, whoever calls it: the kernel, a
// library it calls, shardcheck. A scope reports the peak of (live bytes − live bytes at its start).
//
// Bytes allocated on a thread while it is inside an MPI call (an mpi_heap guard is alive: the
// MPI_* wrappers of shardcheck::pmpi and shardcheck's own communication hold one) belong to MPI:
// they are counted apart, in the MPI meter, and a block is given back to the meter that counted
// it wherever it is freed. MPI_Init run by par::environment is inside one, as are the datatypes
// and op shardcheck makes on first use. A library's start-up (a registry's process_hooks, or
// MPI and a library started by the program before cli_main) is not: a block allocated there and
// freed inside a case lowers that case's peak; one reallocated inside a case counts whole.
// Invisible to both: memory mapped directly (mmap, shared-memory segments, OpenBLAS's buffers in
// its default build), memory a library gets from its own allocator on top of those, and stacks.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace shardcheck::mem {

void on_alloc(std::size_t bytes) noexcept;
void on_free(std::size_t bytes) noexcept;
[[nodiscard]] std::size_t live_bytes() noexcept;
// True when the global operator new of this binary reports to the meter.
[[nodiscard]] bool global_new_tracked() noexcept;
void set_global_new_tracked() noexcept;
// True when this binary's C allocation API reports to the meter (it links shardcheck::new_hook,
// built without AddressSanitizer, whose malloc is its own). tracking_allocator then leaves the
// counting to malloc.
[[nodiscard]] bool heap_tracked() noexcept;

// The MPI meter: what MPI allocates inside its calls.
void on_mpi_alloc(std::size_t bytes) noexcept;
void on_mpi_free(std::size_t bytes) noexcept;
[[nodiscard]] std::size_t mpi_live_bytes() noexcept;
// True while an mpi_heap guard is alive on this thread.
[[nodiscard]] bool inside_mpi() noexcept;

// While alive, what this thread allocates is MPI's (nests).
class mpi_heap {
 public:
  mpi_heap() noexcept;
  ~mpi_heap();
  mpi_heap(const mpi_heap&) = delete;
  mpi_heap& operator=(const mpi_heap&) = delete;
};

// Measures the peak of live bytes above the level at construction, and the MPI meter's apart.
class peak_scope {
 public:
  peak_scope() noexcept;
  ~peak_scope();
  peak_scope(const peak_scope&) = delete;
  peak_scope& operator=(const peak_scope&) = delete;
  [[nodiscard]] std::size_t peak() const noexcept;
  [[nodiscard]] std::size_t mpi_peak() const noexcept;

 private:
  std::size_t base_, mpi_base_;
  std::size_t saved_peak_, saved_mpi_peak_;
};

// Exact sizes, from malloc (aligned for any standard type, 16 bytes on x86-64): a matrix of 7
// doubles is malloc(56), so element 7 lies past the block, where AddressSanitizer and valgrind
// (whose malloc this is under them) report a write to it. Not posix_memalign: glibc serves an
// aligned request from a chunk larger than the bytes asked, so with the heap kept (the benchmarks
// keep freed memory, as a caching allocator would) a buffer freed and asked for again never fits
// the hole the last one left, and every repetition grew the heap by a fresh, page-faulting block
// (100 ms of column_parallel's 235 ms step at 2048³ went to faulting in a new Y).
template <class T>
struct tracking_allocator {
  static_assert(alignof(T) <= alignof(std::max_align_t), "malloc's alignment must suffice");
  using value_type = T;
  tracking_allocator() noexcept = default;
  template <class U>
  tracking_allocator(const tracking_allocator<U>&) noexcept {}
  [[nodiscard]] T* allocate(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    void* p = std::malloc(bytes);
    if (p == nullptr && bytes != 0) throw std::bad_alloc();
    if (!heap_tracked()) on_alloc(bytes);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (!heap_tracked()) on_free(n * sizeof(T));
    std::free(p);
  }
  template <class U>
  bool operator==(const tracking_allocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using tracked_vector = std::vector<T, tracking_allocator<T>>;

// Tracked as tracking_allocator, but a vector's elements start default-initialised
// (indeterminate for float and double) instead of zeroed: for a buffer written whole before it is
// read, by this rank or by a collective, where zeroing first is one more pass over memory
// (redistribute's send-side packing, column_parallel's gathered blocks). A fault layer that
// leaves part of a collective's result undelivered zeroes that part, so that a faulty run gives
// the same values every time.
template <class T>
struct uninitialized_allocator : tracking_allocator<T> {
  template <class U>
  struct rebind {
    using other = uninitialized_allocator<U>;
  };
  uninitialized_allocator() noexcept = default;
  template <class U>
  uninitialized_allocator(const uninitialized_allocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
using scratch_vector = std::vector<T, uninitialized_allocator<T>>;

}  // namespace shardcheck::mem
