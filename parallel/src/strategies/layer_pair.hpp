#pragma once
// What the two-layer tensor-parallel strategies (column_row_pair, sequence_parallel_pair) share:
// Megatron's MLP split, W_1 on its outputs and W_2 on its inputs by the same partition part.H, so
// each rank holds hidden units [offset_r, offset_r + h_r) of both and computes, without talking to
// anyone, its partial of Y = f(X·W_1ᵀ)·W_2ᵀ (a full rows×N matrix summed over ranks) and, from dY,
// its shards of dW_1, dW_2 and its partial of dX (summed over ranks).
//   W_1: out_in H×K, S(0) | in_out K×H, S(1)      W_2: out_in N×H, S(1) | in_out H×N, S(0)
// Strategies are stateless, so backward recomputes the pre-activation H_r (rows×h_r) it needs.
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "shardcheck/parallel/strategy.hpp"

namespace shardcheck::par::layer_pair {

// W_1 / dW_1 (layer 0) split on part.H as its rows (out_in) or columns; W_2 / dW_2 the other way.
[[nodiscard]] layout weight_placement(std::size_t layer, const run_case& c);

// The skeleton both pairs share: a name, exactly two layers, no parameters, the weights placed as
// above, and a deliberate defect (none, except in shardcheck's mutants).
template <class Derived, class Defect>
class pair_strategy : public strategy_base<Derived> {
 public:
  static constexpr bool stacked_strategy = true;
  using defect = Defect;

  pair_strategy(Defect d, std::string name) : defect_(d), name_(std::move(name)) {}
  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] std::size_t max_layers() const override { return 2; }
  [[nodiscard]] std::size_t min_layers() const override { return 2; }
  [[nodiscard]] layout placement_of_layer(tensor /*t*/, std::size_t layer,
                                          const run_case& c) const override {
    return weight_placement(layer, c);
  }

 protected:
  Defect defect_;

 private:
  std::string name_;
};

// Bytes of this rank's blocks of W_1 and W_2 (= dW_1 and dW_2), and of H_r (rows×h_r).
[[nodiscard]] std::int64_t weight_bytes(const run_case& c, int r);
[[nodiscard]] std::int64_t hidden_bytes(const run_case& c, int r, std::int64_t rows);

// partial (rows×N) = f(X·W_1,rᵀ)·W_2,rᵀ; h (rows×h_r) is scratch, left holding f(H_r).
// reversed_w2: a deliberate defect (mutant) pairing hidden unit j of the shard with W_2's unit
// h_r − 1 − j.
template <class T>
void forward_partial(const run_case& c, std::size_t rows, const T* x,
                     std::span<const any_matrix> ws, T* h, T* partial,
                     bool reversed_w2 = false);

// From full X and dY (rows of each): dW_1,r, dW_2,r and the partial dX (rows×K) of this rank;
// h and da are scratch of rows×h_r.
template <class T>
void backward_partial(const run_case& c, std::size_t rows, const T* x,
                      std::span<const any_matrix> ws, const T* dy, T* h, T* da,
                      std::span<any_matrix> dws, T* dx_partial);

// Chains per layer: H_1 over K; Y over the largest h_r plus the reduction `forward`; dX over the
// largest h_r plus the reduction `backward`; dA_1 over N; dW_l over the rows.
[[nodiscard]] std::vector<chain_lengths> chains(const run_case& c, collective forward,
                                                collective backward);

}  // namespace shardcheck::par::layer_pair
