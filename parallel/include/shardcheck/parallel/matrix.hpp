#pragma once
// A rank's dense row-major block of a tensor, in tracked memory (counted by the memory meter).
#include <cstddef>
#include <span>
#include <variant>

#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/reference/mixed.hpp"
#include "shardcheck/reference/types.hpp"

namespace shardcheck::par {

// r × c, or invalid_problem when the product (or its bytes, `elem` each) overflows.
[[nodiscard]] std::size_t checked_elements(std::size_t r, std::size_t c, std::size_t elem);

template <class T>
struct matrix {
  std::size_t rows = 0, cols = 0;
  mem::tracked_vector<T> data;

  matrix() = default;
  // Throws invalid_problem when r × c elements do not fit in memory's address range.
  matrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(elements(r, c)) {}
  [[nodiscard]] T* row(std::size_t i) { return data.data() + i * cols; }
  [[nodiscard]] const T* row(std::size_t i) const { return data.data() + i * cols; }
  [[nodiscard]] std::span<T> span() { return {data.data(), data.size()}; }
  [[nodiscard]] std::span<const T> span() const { return {data.data(), data.size()}; }

 private:
  static std::size_t elements(std::size_t r, std::size_t c) {
    return checked_elements(r, c, sizeof(T));
  }
};

// bfloat16_t and half_t (reference/mixed.hpp) are the 16-bit storage dtypes.
using any_matrix = std::variant<matrix<float>, matrix<double>, matrix<bfloat16_t>, matrix<half_t>>;

template <class T>
[[nodiscard]] any_matrix make_matrix(std::size_t rows, std::size_t cols) {
  return any_matrix(std::in_place_type<matrix<T>>, rows, cols);
}
[[nodiscard]] any_matrix make_matrix(dtype t, std::size_t rows, std::size_t cols);
[[nodiscard]] std::size_t rows_of(const any_matrix& m);
[[nodiscard]] std::size_t cols_of(const any_matrix& m);

}  // namespace shardcheck::par
