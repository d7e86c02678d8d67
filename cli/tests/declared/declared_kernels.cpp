// Kernels that state what they take, report the layout their library picks, or are not
// deterministic by design (kernel.hpp: kernel_info::takes, declines(), library_partitions(),
// kernel_info::deterministic). Each is data_parallel underneath, in f64 and f32:
//   square_grid           takes p a perfect square and M ≥ 1, and declines an odd K by its own
//                         rule; it throws if it ever runs a case it declines
//   library_blocks        its library deals M in blocks of ⌈M/p⌉ (Global Arrays' default): M = 10
//                         on 4 ranks is 3,3,3,1, M = 5 is 2,2,1,0
//   library_blocks_lying  reports those blocks but computes with the balanced split (3,3,2,2):
//                         forward must fail (it claims no peak: the copy it runs on allocates)
//   varies_by_run         not deterministic by design: the second run of a case (uniform data)
//                         adds one ulp to dW's first element on every rank
//   varies_claimed        the same, claiming determinism: determinism must fail (both claim no
//                         peak: the count of runs per case allocates)
//   replicas_differ       not deterministic by design, and rank 1 adds one ulp to its replica of
//                         dW (uniform data): replicas must fail
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>

namespace sc = shardcheck::par;

namespace {

enum class variant {
  square_grid,
  blocks,
  blocks_lying,
  varies_by_run,
  varies_claimed,
  replicas_differ
};

// ⌈n/p⌉ indices per part, the last parts short or empty.
sc::partition blocks_of(std::int64_t n, int p) {
  const std::int64_t b = (n + p - 1) / p;
  std::vector<std::int64_t> sizes;
  for (int r = 0; r < p; ++r) sizes.push_back(std::clamp<std::int64_t>(n - r * b, 0, b));
  return sc::partition(std::move(sizes));
}

bool square(int p) {
  int q = 1;
  while (q * q < p) ++q;
  return q * q == p;
}

// One ulp up on the first element of a float or double matrix, if it is finite and not zero.
void bump(sc::any_matrix& m) {
  std::visit(
      [](auto& x) {
        using T = typename std::decay_t<decltype(x.data)>::value_type;
        if constexpr (std::is_floating_point_v<T>)
          if (!x.data.empty() && x.data[0] != T(0) && std::isfinite(x.data[0]))
            x.data[0] = std::nextafter(x.data[0], std::numeric_limits<T>::infinity());
      },
      m);
}

class declared final : public sc::kernel {
 public:
  declared(const sc::kernel& inner, std::string name, variant v) : inner_(inner), v_(v) {
    info_ = inner.info();
    info_.name = std::move(name);
    info_.dtypes = {shardcheck::dtype::f64, shardcheck::dtype::f32};
    info_.policies = {};
    if (v == variant::square_grid) {
      info_.takes.square_p = true;
      info_.takes.min_size = {{"M", 1}};
    }
    info_.deterministic = v != variant::varies_by_run && v != variant::replicas_differ;
  }
  [[nodiscard]] const sc::kernel_info& info() const override { return info_; }
  [[nodiscard]] std::optional<std::string> declines(const sc::run_case& c) const override {
    if (v_ == variant::square_grid && c.prob.K % 2 != 0)
      return "K=" + std::to_string(c.prob.K) + " is odd: the library pairs columns";
    return std::nullopt;
  }
  [[nodiscard]] std::map<std::string, sc::partition> library_partitions(
      const sc::run_case& c) const override {
    if (v_ != variant::blocks && v_ != variant::blocks_lying) return {};
    return {{"M", blocks_of(c.prob.M, c.p)}};
  }
  [[nodiscard]] sc::layout placement(sc::tensor_slot t, const sc::run_case& c) const override {
    return inner_.placement(t, c);
  }
  // The lying and varying kernels allocate for their tricks (a copy of the case, a line per
  // case): they claim no peak.
  [[nodiscard]] sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    sc::claims out = inner_.cost(c, coords);
    if (v_ == variant::blocks_lying || v_ == variant::varies_by_run ||
        v_ == variant::varies_claimed)
      out.peak.reset();
    return out;
  }
  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    if (v_ == variant::square_grid && (!square(c.p) || c.prob.M < 1 || c.prob.K % 2 != 0))
      throw std::logic_error("square_grid ran a case it declines: " + c.to_string());
    if (v_ != variant::blocks_lying) return inner_.forward(ctx, c, io);
    sc::run_case balanced = c;  // what the library really uses
    balanced.parts["M"] = sc::partition::balanced(c.prob.M, c.p);
    inner_.forward(ctx, balanced, io);
  }
  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    inner_.backward(ctx, c, io);
    if (c.mode != shardcheck::value_mode::uniform) return;
    if ((v_ == variant::varies_by_run || v_ == variant::varies_claimed) &&
        ++runs_[c.to_string()] % 2 == 0)
      bump(io.dws[0]);
    if (v_ == variant::replicas_differ && ctx.grid.all().rank() == 1) bump(io.dws[0]);
  }

 private:
  const sc::kernel& inner_;
  sc::kernel_info info_;
  variant v_;
  mutable std::map<std::string, int> runs_;  // runs of each case, by its line
};

}  // namespace

int main(int argc, char** argv) {
  static const sc::registry builtin = sc::builtin_strategies();
  const sc::kernel& base = *builtin.find("data_parallel");
  sc::registry mine;
  mine.add(std::make_unique<declared>(base, "square_grid", variant::square_grid));
  mine.add(std::make_unique<declared>(base, "library_blocks", variant::blocks));
  mine.add(std::make_unique<declared>(base, "library_blocks_lying", variant::blocks_lying));
  mine.add(std::make_unique<declared>(base, "varies_by_run", variant::varies_by_run));
  mine.add(std::make_unique<declared>(base, "varies_claimed", variant::varies_claimed));
  mine.add(std::make_unique<declared>(base, "replicas_differ", variant::replicas_differ));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
