// Replaces the global operator new/delete so that every allocation of the binary that links this
// object reaches shardcheck's memory meter.
//
// Built as usual, operator new allocates through the program's metered C allocation API
// (heap_hook.cpp), which counts the requested bytes exactly: new double[7] counts 56 bytes, and
// aligned new (alignment a > 16) asks for an a-aligned block. Defined here, in the program, it is
// the program's own (valgrind run with --soname-synonyms=somalloc=nouserintercepts keeps it, and
// then the meter sees plain new; without that option valgrind replaces it).
//
// Under AddressSanitizer (whose malloc is its own, so heap_hook.cpp is not built) operator new
// keeps its own header and counts for itself. The block is asked of malloc at its exact size: its
// header (the requested size and the header's length) lies BEFORE the user's bytes, never slack
// after them. For `new double[7]`:
//   malloc(16 + 56) → raw;  user = raw + 16;  raw[0..16) = {16, 56};  on_alloc(56)
// so user[7] is the first byte past the block, which AddressSanitizer sees, and while the block
// lives the header is marked unaddressable to it, so a write at user[-1] is seen as well.
// Aligned new (alignment a > 16) uses posix_memalign(a, a + n), header a bytes, user aligned to a.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "heap_hook.hpp"
#include "shardcheck/parallel/memory.hpp"

#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION: no-ops without ASan
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>  // client requests: a few no-op instructions outside valgrind
#define SHARDCHECK_HIDE_HEADER(addr, size) (void)VALGRIND_MAKE_MEM_NOACCESS(addr, size)
#define SHARDCHECK_SHOW_HEADER(addr, size) (void)VALGRIND_MAKE_MEM_DEFINED(addr, size)
#else
#define SHARDCHECK_HIDE_HEADER(addr, size) ((void)(addr), (void)(size))
#define SHARDCHECK_SHOW_HEADER(addr, size) ((void)(addr), (void)(size))
#endif

namespace {
// Two size_t words, and malloc's own alignment (16 on x86-64), which plain new promises.
constexpr std::size_t min_header = alignof(std::max_align_t) > 2 * sizeof(std::size_t)
                                       ? alignof(std::max_align_t)
                                       : 2 * sizeof(std::size_t);

struct registrar {
  registrar() { shardcheck::mem::set_global_new_tracked(); }
} const registered;

#if SHARDCHECK_HEAP_HOOK
void* allocate(std::size_t bytes, std::size_t align) noexcept {
  return shardcheck::mem::detail::heap_allocate(bytes, align > min_header ? align : 0);
}
void release(void* p) noexcept { shardcheck::mem::detail::heap_release(p); }
#else
void* allocate(std::size_t bytes, std::size_t align) noexcept {
  const std::size_t head = align > min_header ? align : min_header;
  if (bytes > SIZE_MAX - head) return nullptr;
  void* raw = nullptr;
  if (head == alignof(std::max_align_t)) {
    raw = std::malloc(head + bytes);
  } else if (posix_memalign(&raw, head, head + bytes) != 0) {
    raw = nullptr;
  }
  if (raw == nullptr) return nullptr;
  auto* user = static_cast<unsigned char*>(raw) + head;
  reinterpret_cast<std::size_t*>(user)[-1] = bytes;
  reinterpret_cast<std::size_t*>(user)[-2] = head;
  ASAN_POISON_MEMORY_REGION(raw, head);
  SHARDCHECK_HIDE_HEADER(raw, head);
  shardcheck::mem::on_alloc(bytes);
  return user;
}
void release(void* p) noexcept {
  if (p == nullptr) return;
  auto* user = static_cast<unsigned char*>(p);
  auto* words = reinterpret_cast<std::size_t*>(user) - 2;
  ASAN_UNPOISON_MEMORY_REGION(words, 2 * sizeof(std::size_t));
  SHARDCHECK_SHOW_HEADER(words, 2 * sizeof(std::size_t));
  const std::size_t bytes = words[1];
  const std::size_t head = words[0];
  shardcheck::mem::on_free(bytes);
  std::free(user - head);
}
#endif
void* allocate_or_throw(std::size_t bytes, std::size_t align) {
  void* p = allocate(bytes, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n, 0); }
void* operator new[](std::size_t n) { return allocate_or_throw(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) {
  return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
