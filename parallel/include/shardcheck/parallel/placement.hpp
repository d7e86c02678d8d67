#pragma once
// Shardings as data (one placement per mesh axis): R replicate, S(d) shard tensor dimension d
// (0 = rows, 1 = columns) by the case's partition of that problem dimension, P partial sums,
// On(r) the whole tensor (as the other axes place it) on coordinate r of this axis and nothing
// on the others: a pipeline's stage r holds its layers' weights, stage 0 X, the last stage Y.
// BC(d,nb=b,src=s) deals dimension d block-cyclically over the axis: blocks of b indices (the last
// may be partial), block i on coordinate (s + i) mod P, as ScaLAPACK's 2D layout on each grid axis
// (s is its RSRC/CSRC; printed only when non-zero). A rank's share is then a set of tiles (see
// `block` in kernel.hpp): e.g. 10 rows, BC(0,nb=3,src=1) on 2 coordinates: coordinate 1 holds rows
// 0-2 and 6-8, coordinate 0 rows 3-5 and 9.
// A layout prints as its placements joined by commas: "S(0)", "R", "S(0),S(1)", "S(0),On(2),R",
// "BC(0,nb=4),BC(1,nb=2,src=1)".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::par {

struct placement {
  enum class kind { replicate, shard, partial, on, cyclic };
  kind what = kind::replicate;
  int dim = 0;          // S, BC: the tensor dimension; On: the coordinate holding the tensor
  std::int64_t nb = 0;  // BC: the block size (≥ 1)
  int src = 0;          // BC: the coordinate holding the first block

  [[nodiscard]] static placement R() { return {kind::replicate, 0}; }
  [[nodiscard]] static placement S(int d) { return {kind::shard, d}; }
  [[nodiscard]] static placement P() { return {kind::partial, 0}; }
  [[nodiscard]] static placement On(int coordinate) { return {kind::on, coordinate}; }
  [[nodiscard]] static placement BC(int d, std::int64_t block, int source = 0) {
    return {kind::cyclic, d, block, source};
  }
  [[nodiscard]] std::string to_string() const;
  // "R", "P", "S(0)", "S(1)", "On(r)" (r ≥ 0), "BC(d,nb=b)" or "BC(d,nb=b,src=s)" (d 0 or 1,
  // b ≥ 1, s ≥ 0); throws invalid_problem otherwise.
  [[nodiscard]] static placement parse(std::string_view s);
  friend bool operator==(const placement&, const placement&) = default;
};

using layout = std::vector<placement>;
[[nodiscard]] std::string to_string(const layout& l);
[[nodiscard]] layout parse_layout(std::string_view s);

// The tensors of a linear layer; their dimensions are problem dimensions.
enum class tensor { x, w, y, dy, dx, dw };
[[nodiscard]] std::string_view to_string(tensor t);
inline constexpr tensor all_tensors[] = {tensor::x,  tensor::w,  tensor::y,
                                         tensor::dy, tensor::dx, tensor::dw};

// One tensor of a case: its kind and, for W and dW, its layer (0 is W_1). A stack of L layers has
// X, W_1…W_L, Y, dY, dX, dW_1…dW_L; a single layer has the six tensors of all_tensors.
struct tensor_slot {
  tensor t = tensor::x;
  std::size_t layer = 0;
  tensor_slot() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): a tensor of a single layer is its slot
  tensor_slot(tensor kind, std::size_t l = 0) : t(kind), layer(l) {}
  friend bool operator==(const tensor_slot&, const tensor_slot&) = default;
};

}  // namespace shardcheck::par
