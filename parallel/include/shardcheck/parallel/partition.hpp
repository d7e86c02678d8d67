#pragma once
// How one dimension of length n is split into p parts: contiguous, in rank order, any sizes
// (uneven and empty parts are legal). Example: n = 7, p = 3, balanced → 3,2,2 (offsets 0,3,5);
// explicit "3,0,4" → rank 1 holds nothing.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::par {

// The most workers a case may have, and so the most parts of a partition: 2^20.
inline constexpr int max_parts = 1 << 20;

class partition {
 public:
  partition() = default;
  // Throws invalid_problem on a negative size or a length that does not fit in 64 bits.
  explicit partition(std::vector<std::int64_t> sizes);
  // torch.chunk-free balanced split: the first n mod p parts get one more.
  [[nodiscard]] static partition balanced(std::int64_t n, int p);
  // "3,0,4"; throws invalid_problem on anything else.
  [[nodiscard]] static partition parse(std::string_view s);

  [[nodiscard]] int parts() const { return static_cast<int>(sizes_.size()); }
  [[nodiscard]] std::int64_t length() const { return offsets_.back(); }
  [[nodiscard]] std::int64_t size(int r) const { return sizes_.at(static_cast<std::size_t>(r)); }
  [[nodiscard]] std::int64_t offset(int r) const {
    return offsets_.at(static_cast<std::size_t>(r));
  }
  [[nodiscard]] const std::vector<std::int64_t>& sizes() const { return sizes_; }
  [[nodiscard]] std::int64_t max_size() const;
  // The part holding global index i (the non-empty one).
  [[nodiscard]] int owner(std::int64_t i) const;
  // Every part's size multiplied by `scale` (e.g. rows × columns for a row block).
  [[nodiscard]] std::vector<std::int64_t> scaled(std::int64_t scale) const;
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const partition&, const partition&) = default;

 private:
  std::vector<std::int64_t> sizes_;
  std::vector<std::int64_t> offsets_{0};
};

}  // namespace shardcheck::par
