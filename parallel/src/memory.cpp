#include "shardcheck/parallel/memory.hpp"

#include <tuple>

// Defined by heap_hook.cpp: present exactly when the program meters the C allocation API.
extern "C" [[gnu::weak]] void shardcheck_heap_hook();

namespace shardcheck::mem {
namespace {
// One meter: live bytes and their peak since the innermost peak_scope opened.
struct meter {
  std::atomic<std::size_t> live{0};
  std::atomic<std::size_t> peak{0};
  void alloc(std::size_t bytes) noexcept {
    const std::size_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void free(std::size_t bytes) noexcept { live.fetch_sub(bytes, std::memory_order_relaxed); }
  // Restarts the peak at the current level; returns {level, old peak}.
  std::pair<std::size_t, std::size_t> open() noexcept {
    const std::size_t base = live.load(std::memory_order_relaxed);
    const std::size_t saved = peak.load();
    peak.store(base);
    return {base, saved};
  }
  void close(std::size_t saved) noexcept {
    std::size_t seen = peak.load();
    while (saved > seen && !peak.compare_exchange_weak(seen, saved)) {
    }
  }
  [[nodiscard]] std::size_t above(std::size_t base) const noexcept {
    const std::size_t p = peak.load(std::memory_order_relaxed);
    return p > base ? p - base : 0;
  }
};
meter kernel_meter, mpi_meter;
std::atomic<bool> global_tracked{false};
constinit thread_local int mpi_depth = 0;
}  // namespace

void on_alloc(std::size_t bytes) noexcept { kernel_meter.alloc(bytes); }
void on_free(std::size_t bytes) noexcept { kernel_meter.free(bytes); }
std::size_t live_bytes() noexcept { return kernel_meter.live.load(std::memory_order_relaxed); }
bool global_new_tracked() noexcept { return global_tracked.load() || heap_tracked(); }
void set_global_new_tracked() noexcept { global_tracked.store(true); }
bool heap_tracked() noexcept { return shardcheck_heap_hook != nullptr; }

void on_mpi_alloc(std::size_t bytes) noexcept { mpi_meter.alloc(bytes); }
void on_mpi_free(std::size_t bytes) noexcept { mpi_meter.free(bytes); }
std::size_t mpi_live_bytes() noexcept { return mpi_meter.live.load(std::memory_order_relaxed); }
bool inside_mpi() noexcept { return mpi_depth > 0; }
mpi_heap::mpi_heap() noexcept { ++mpi_depth; }
mpi_heap::~mpi_heap() { --mpi_depth; }

peak_scope::peak_scope() noexcept {
  std::tie(base_, saved_peak_) = kernel_meter.open();
  std::tie(mpi_base_, saved_mpi_peak_) = mpi_meter.open();
}
peak_scope::~peak_scope() {
  kernel_meter.close(saved_peak_);
  mpi_meter.close(saved_mpi_peak_);
}
std::size_t peak_scope::peak() const noexcept { return kernel_meter.above(base_); }
std::size_t peak_scope::mpi_peak() const noexcept { return mpi_meter.above(mpi_base_); }

}  // namespace shardcheck::mem
