// Replaces the global operator new/delete so that every allocation of the binary that links this
// object reaches shardcheck's memory meter. Each block carries a header with its size.
#include <cstdlib>
#include <new>

#include "shardcheck/parallel/memory.hpp"

namespace {
constexpr std::size_t header = 64;  // keeps every alignment up to 64 for the user pointer

struct registrar {
  registrar() { shardcheck::mem::set_global_new_tracked(); }
} const registered;

void* allocate(std::size_t bytes, std::size_t align) {
  if (align < alignof(std::max_align_t)) align = alignof(std::max_align_t);
  const std::size_t head = align > header ? align : header;
  void* raw = std::aligned_alloc(head, (head + bytes + head - 1) / head * head);
  if (raw == nullptr) return nullptr;
  auto* user = static_cast<unsigned char*>(raw) + head;
  reinterpret_cast<std::size_t*>(user)[-1] = bytes;
  reinterpret_cast<std::size_t*>(user)[-2] = head;
  shardcheck::mem::on_alloc(bytes);
  return user;
}
void release(void* p) noexcept {
  if (p == nullptr) return;
  auto* user = static_cast<unsigned char*>(p);
  const std::size_t bytes = reinterpret_cast<std::size_t*>(user)[-1];
  const std::size_t head = reinterpret_cast<std::size_t*>(user)[-2];
  shardcheck::mem::on_free(bytes);
  std::free(user - head);
}
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
