#pragma once
// A stand-in for the layer below a fault: rank `me` of `p` simulated ranks, no MPI traffic. Every
// other rank q's data is value(q, i) = 100·(q+1) + i (its i-th element of whatever it sends), so
// each collective's result is known in closed form (a test may set `values` instead):
//   all-gather        part q ≠ me becomes value(q, 0 … c_q−1); part me is left alone
//   all-reduce        out[i] += Σ_{q≠me} value(q, i)
//   reduce-scatter    out[j] = in[d_me + j] + Σ_{q≠me} value(q, d_me + j)
//   broadcast         root ≠ me: out[i] = value(root, i)
//   all-to-all        block q ≠ me becomes value(q, 0 … r_q−1); block me = in's block me
//   recv              value(peer, i)
// Each call returns the traffic {sent = 1000·(kind+1) + count, received = root + 2} so that a
// test can tell which call's traffic a layer returned. Calls and sends are logged.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "shardcheck/parallel/comm.hpp"

namespace shardcheck::prop::testing {

struct logged_call {
  par::collective kind;
  std::int64_t count;
  int root;
  bool started;
};

struct logged_send {
  int peer, tag;
  std::vector<double> payload;  // f64 messages only
};

class fake_collectives final : public par::collectives {
 public:
  fake_collectives(int me, int p) : me_(me), p_(p) {}
  [[nodiscard]] static double value(int q, std::int64_t i) {
    return 100.0 * (q + 1) + static_cast<double>(i);
  }
  [[nodiscard]] static par::traffic traffic_of(const par::call& c) {
    return {1000 * (static_cast<std::int64_t>(c.kind) + 1) + c.count, c.root + 2};
  }
  [[nodiscard]] int rank() const override { return me_; }
  [[nodiscard]] int size() const override { return p_; }
  [[nodiscard]] MPI_Comm native_handle() const override { return MPI_COMM_NULL; }
  par::traffic run(const par::call& c) override;
  void start(const par::call& c) override;
  bool test() override { return true; }
  par::traffic wait() override;
  [[nodiscard]] MPI_Request send(const par::message& m) override;
  void wait_send(MPI_Request& r) override { r = MPI_REQUEST_NULL; }
  std::int64_t recv(const par::message& m) override;

  // Rank q's i-th element: value() unless a test sets another.
  std::function<double(int, std::int64_t)> values = value;
  std::vector<logged_call> calls;
  std::vector<logged_send> sends;

 private:
  par::traffic perform(const par::call& c);
  int me_, p_;
  bool pending_ = false;
  par::call started_;
};

// A fake layer of rank me of p, as a unique_ptr (what a fault layer takes), and a view of it.
struct fake_stack {
  fake_stack(int me, int p) {
    auto f = std::make_unique<fake_collectives>(me, p);
    fake = f.get();
    owner = std::move(f);
  }
  std::unique_ptr<par::collectives> owner;
  fake_collectives* fake = nullptr;
};

}  // namespace shardcheck::prop::testing
