#pragma once
// Collectives checked as pseudo-strategies (registered beside the harness, checks.hpp; not in
// the product's registry): a linear layer whose only job is to move its result through one
// collective, so the driver, generators, ledger, memory, determinism and replica
// properties hold the collective itself to the reference, on random p, shapes with zero and uneven
// parts, dtypes and both backends. All-gather, all-reduce and reduce-scatter already have such
// hosts (data_parallel, column_parallel, row_parallel); these two cover the collectives no strategy
// needs.
//
// collective.broadcast (parameter root; the root is root mod p):
//   X: R  W: R  Y: R    dY: R  dX: R  dW: R
//   the root alone computes Y, dX and dW; forward broadcasts Y (M·N), backward dX (M·K) then dW
//   (N·K). Example: p = 3, root=4: rank 1 computes, ranks 0 and 2 receive.
//
// collective.all_to_all: Y redistributed from rows to columns, S(0) → S(1).
//   X: S(0)  W: R  Y: S(1)    dY: R  dX: S(0)  dW: R
//   forward: each rank computes its rows of Y, packs them by destination column block and runs one
//   all-to-all(v) (send counts rows_r·cols_q, receive counts rows_q·cols_r); backward is data
//   parallel's: dX local, one all-reduce of the dW partials.
//   Example: p = 2, M = 3 (part.M 2,1), N = 4 (part.N 1,3): rank 0 sends 2·1 elements to itself and
//   2·3 to rank 1, and receives 1·1 from rank 1; Y on rank 0 is the 3×1 first column.
#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::prop::checks {

class collective_check final : public par::kernel {
 public:
  // kind is par::collective::broadcast or par::collective::all_to_all; the name is
  // "collective.<kind>".
  explicit collective_check(par::collective kind);
  [[nodiscard]] const par::kernel_info& info() const override { return info_; }
  [[nodiscard]] par::layout placement(par::tensor_slot t, const par::run_case& c) const override;
  [[nodiscard]] par::claims cost(const par::run_case& c,
                                 std::span<const int> coords) const override;
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override;

 private:
  [[nodiscard]] bool is_broadcast() const { return kind_ == par::collective::broadcast; }
  par::collective kind_;
  par::kernel_info info_;
};

}  // namespace shardcheck::prop::checks
