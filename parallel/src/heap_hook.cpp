// The C allocation API, replaced so that every block the process allocates reaches shardcheck's
// memory meter (memory.hpp): malloc, calloc, realloc, reallocarray, free, posix_memalign,
// aligned_alloc, memalign, valloc, pvalloc and malloc_usable_size. Defined in the program, they
// interpose glibc's for the program and every library it loads (MPI, BLAS, PETSc, …), which call
// them through their PLT; glibc's own internal allocations too. The blocks themselves come from
// glibc's __libc_malloc, __libc_calloc, __libc_realloc, __libc_memalign and __libc_free (no dlsym:
// dlsym allocates, which would recurse).
//
// Every block carries a 16-byte header right before the user's bytes:
//   word 0: the user address XOR a constant (the block is ours: anything else passed to free or
//           realloc, e.g. memory allocated before this hook or through __libc_malloc directly, is
//           handed to glibc uncounted, so the meter never underflows);
//   word 1: the requested size (bits 0–55), log2 of the header's length (bits 56–61: 16 for
//           malloc, the alignment for an aligned block, whose raw block starts that far before
//           the user's bytes), and bit 63 set when the block was counted by the MPI meter.
// For malloc(56): __libc_malloc(16 + 56) → raw; user = raw + 16; meter += 56. For
// posix_memalign(&p, 64, 100): __libc_memalign(64, 64 + 100) → raw; user = raw + 64.
// Counted: the requested bytes, exactly, to the meter of the thread's state at allocation
// (inside an MPI call or not), given back to the same meter at free. realloc counts the new size
// before giving back the old when the block moved (both lived at once), after when it grew or
// shrank in place.
#include "heap_hook.hpp"

#if SHARDCHECK_HEAP_HOOK
#include <dlfcn.h>
#include <unistd.h>

#include <malloc.h>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "shardcheck/parallel/memory.hpp"

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
// Read by memory.cpp: the program meters the C allocation API.
void shardcheck_heap_hook() {}
}

namespace shardcheck::mem::detail {
namespace {
constexpr std::size_t header_bytes = 16;
constexpr std::uintptr_t magic = 0x5ca1ab1e0dd5eed5;
constexpr std::uint64_t size_mask = (std::uint64_t{1} << 56) - 1;
constexpr unsigned head_shift = 56;
constexpr std::uint64_t mpi_bit = std::uint64_t{1} << 63;

struct header {
  std::uintptr_t tag;
  std::uint64_t word;
};
header* header_of(void* user) { return static_cast<header*>(user) - 1; }

struct block {
  bool ours = false;
  std::size_t bytes = 0, head = 0;
  bool mpi = false;
  void* raw = nullptr;
};
block inspect(void* user) {
  const header* h = header_of(user);
  if (h->tag != (reinterpret_cast<std::uintptr_t>(user) ^ magic)) return {};
  block b;
  b.ours = true;
  b.bytes = static_cast<std::size_t>(h->word & size_mask);
  b.head = std::size_t{1} << ((h->word >> head_shift) & 63);
  b.mpi = (h->word & mpi_bit) != 0;
  b.raw = static_cast<unsigned char*>(user) - b.head;
  return b;
}

void count_alloc(std::size_t bytes, bool mpi) {
  if (mpi)
    on_mpi_alloc(bytes);
  else
    on_alloc(bytes);
}
void count_free(const block& b) {
  if (b.mpi)
    on_mpi_free(b.bytes);
  else
    on_free(b.bytes);
}

// Stamps the header of a block whose raw allocation starts `head` bytes before user.
void* stamp(void* raw, std::size_t head, std::size_t bytes) {
  void* user = static_cast<unsigned char*>(raw) + head;
  const bool mpi = inside_mpi();
  unsigned log2 = 0;
  while ((std::size_t{1} << log2) < head) ++log2;
  header* h = header_of(user);
  h->tag = reinterpret_cast<std::uintptr_t>(user) ^ magic;
  h->word =
      static_cast<std::uint64_t>(bytes) | (std::uint64_t{log2} << head_shift) | (mpi ? mpi_bit : 0);
  count_alloc(bytes, mpi);
  return user;
}

bool power_of_two(std::size_t a) { return a != 0 && (a & (a - 1)) == 0; }

void* allocate(std::size_t bytes, std::size_t align, bool zero) {
  const std::size_t head = align > header_bytes ? align : header_bytes;
  if (bytes > size_mask || bytes > SIZE_MAX - head) {
    errno = ENOMEM;
    return nullptr;
  }
  void* raw = head == header_bytes
                  ? (zero ? __libc_calloc(1, head + bytes) : __libc_malloc(head + bytes))
                  : __libc_memalign(head, head + bytes);
  if (raw == nullptr) return nullptr;
  if (zero && head != header_bytes) std::memset(raw, 0, head + bytes);
  return stamp(raw, head, bytes);
}

// glibc's malloc_usable_size, for a block that is not ours (looked up once, outside any
// allocation of this file's, so dlsym's own allocations are plain ones).
std::size_t foreign_usable_size(void* p) {
  using fn = std::size_t (*)(void*);
  static std::atomic<fn> glibc{nullptr};
  fn f = glibc.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<fn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
    glibc.store(f, std::memory_order_release);
  }
  return f != nullptr ? f(p) : 0;
}

std::size_t page_size() {
  const long s = sysconf(_SC_PAGESIZE);
  return s > 0 ? static_cast<std::size_t>(s) : 4096;
}

void* reallocate(void* p, std::size_t bytes) {
  if (p == nullptr) return allocate(bytes, 0, false);
  if (bytes == 0) {  // glibc frees and returns nullptr
    heap_release(p);
    return nullptr;
  }
  const block b = inspect(p);
  if (b.ours && b.head == header_bytes) {
    if (bytes > size_mask || bytes > SIZE_MAX - header_bytes) {
      errno = ENOMEM;
      return nullptr;
    }
    header_of(p)->tag = 0;
    void* raw = __libc_realloc(b.raw, header_bytes + bytes);
    if (raw == nullptr) {  // the old block stays, still counted
      header_of(p)->tag = reinterpret_cast<std::uintptr_t>(p) ^ magic;
      return nullptr;
    }
    if (raw == b.raw) {
      count_free(b);
      return stamp(raw, header_bytes, bytes);
    }
    void* user = stamp(raw, header_bytes, bytes);
    count_free(b);
    return user;
  }
  void* q = allocate(bytes, 0, false);
  if (q == nullptr) return nullptr;
  const std::size_t old = b.ours ? b.bytes : foreign_usable_size(p);
  std::memcpy(q, p, old < bytes ? old : bytes);
  heap_release(p);
  return q;
}
}  // namespace

void* heap_allocate(std::size_t bytes, std::size_t align) noexcept {
  return allocate(bytes, align, false);
}

void heap_release(void* p) noexcept {
  if (p == nullptr) return;
  const block b = inspect(p);
  if (!b.ours) {
    __libc_free(p);
    return;
  }
  header_of(p)->tag = 0;
  count_free(b);
  __libc_free(b.raw);
}

}  // namespace shardcheck::mem::detail

namespace detail = shardcheck::mem::detail;

extern "C" {

void* malloc(std::size_t n) noexcept { return detail::allocate(n, 0, false); }

void* calloc(std::size_t count, std::size_t size) noexcept {
  if (size != 0 && count > SIZE_MAX / size) {
    errno = ENOMEM;
    return nullptr;
  }
  return detail::allocate(count * size, 0, true);
}

void* realloc(void* p, std::size_t n) noexcept { return detail::reallocate(p, n); }

void* reallocarray(void* p, std::size_t count, std::size_t size) noexcept {
  if (size != 0 && count > SIZE_MAX / size) {
    errno = ENOMEM;
    return nullptr;
  }
  return detail::reallocate(p, count * size);
}

void free(void* p) noexcept { detail::heap_release(p); }

int posix_memalign(void** out, std::size_t align, std::size_t n) noexcept {
  if (!detail::power_of_two(align) || align % sizeof(void*) != 0) return EINVAL;
  const int saved = errno;
  void* p = detail::allocate(n, align, false);
  errno = saved;
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* aligned_alloc(std::size_t align, std::size_t n) noexcept {
  if (!detail::power_of_two(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return detail::allocate(n, align, false);
}

void* memalign(std::size_t align,
               std::size_t n) noexcept {  // like glibc: rounded up to a power of two
  std::size_t a = 1;
  while (a < align && a < (std::size_t{1} << 55)) a <<= 1;
  return detail::allocate(n, a, false);
}

void* valloc(std::size_t n) noexcept { return detail::allocate(n, detail::page_size(), false); }

void* pvalloc(std::size_t n) noexcept {
  const std::size_t page = detail::page_size();
  if (n > SIZE_MAX - page) {
    errno = ENOMEM;
    return nullptr;
  }
  return detail::allocate((n + page - 1) / page * page, page, false);
}

// The bytes asked for: all a caller may use, and all the meter counted.
std::size_t malloc_usable_size(void* p) noexcept {
  if (p == nullptr) return 0;
  const detail::block b = detail::inspect(p);
  return b.ours ? b.bytes : detail::foreign_usable_size(p);
}

}  // extern "C"

#endif  // SHARDCHECK_HEAP_HOOK
