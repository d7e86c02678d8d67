#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::mem {
namespace {
std::atomic<std::size_t> live{0};
std::atomic<std::size_t> peak_live{0};
std::atomic<bool> global_tracked{false};
}  // namespace

void on_alloc(std::size_t bytes) noexcept {
  const std::size_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::size_t seen = peak_live.load(std::memory_order_relaxed);
  while (now > seen && !peak_live.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}
void on_free(std::size_t bytes) noexcept { live.fetch_sub(bytes, std::memory_order_relaxed); }
std::size_t live_bytes() noexcept { return live.load(std::memory_order_relaxed); }
bool global_new_tracked() noexcept { return global_tracked.load(); }
void set_global_new_tracked() noexcept { global_tracked.store(true); }

peak_scope::peak_scope() noexcept
    : base_(live.load(std::memory_order_relaxed)), saved_peak_(peak_live.load()) {
  peak_live.store(base_);
}
peak_scope::~peak_scope() {
  std::size_t seen = peak_live.load();
  while (saved_peak_ > seen && !peak_live.compare_exchange_weak(seen, saved_peak_)) {
  }
}
std::size_t peak_scope::peak() const noexcept {
  const std::size_t p = peak_live.load(std::memory_order_relaxed);
  return p > base_ ? p - base_ : 0;
}

}  // namespace shardcheck::mem
