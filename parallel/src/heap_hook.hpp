#pragma once
// The C allocation API of a program that links shardcheck::new_hook (heap_hook.cpp), and the
// entry points its operator new (new_hook.cpp) allocates through. Not built under
// AddressSanitizer, whose malloc is its own: there operator new keeps its own header and only
// operator new and tracking_allocator reach the meter.
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define SHARDCHECK_HEAP_HOOK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHARDCHECK_HEAP_HOOK 0
#endif
#endif
#ifndef SHARDCHECK_HEAP_HOOK
#define SHARDCHECK_HEAP_HOOK 1
#endif

namespace shardcheck::mem::detail {
// `bytes` aligned to `align` (0: malloc's), counted by the meter; nullptr when out of memory.
void* heap_allocate(std::size_t bytes, std::size_t align) noexcept;
// Gives back a block of heap_allocate (or of any allocation function of the C API).
void heap_release(void* p) noexcept;
}  // namespace shardcheck::mem::detail
