#include "mutants/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "strategies/pipeline.hpp"
#include "strategies/sharded_weights.hpp"
#include "strategies/summa.hpp"

namespace shardcheck::prop::mutants {

namespace {
std::size_t bytes_of(const par::any_matrix& m) {
  return std::visit([](const auto& v) { return v.data.size() * sizeof(v.data[0]); }, m);
}

std::size_t bytes_of(std::span<const par::any_matrix> ms) {
  std::size_t n = 0;
  for (const par::any_matrix& m : ms) n += bytes_of(m);
  return n;
}

// Rounds a f64 matrix's values to float and back; true if any value changed.
bool round_to_float(par::any_matrix& m) {
  auto* d = std::get_if<par::matrix<double>>(&m);
  if (d == nullptr) return false;
  bool changed = false;
  for (double& v : d->data) {
    const auto r = static_cast<double>(static_cast<float>(v));
    if (std::memcmp(&r, &v, sizeof r) != 0) changed = true;
    v = r;
  }
  return changed;
}

using matrices = untracked_vector<par::any_matrix>;
std::span<const par::any_matrix> view(const matrices& ms) { return {ms.data(), ms.size()}; }

// A store the optimiser must keep, so that a copy read into it is really made.
volatile double copy_sink = 0;
template <class T>
void keep(const std::vector<T>& v) {
  if (!v.empty()) copy_sink = static_cast<double>(v[v.size() / 2]);
}
}  // namespace

kernel_decorator::kernel_decorator(const par::kernel& inner, std::string name,
                                   std::shared_ptr<fire_log> log)
    : inner_(inner), info_(inner.info()), log_(std::move(log)) {
  info_.name = std::move(name);
}

// --- float_inputs -----------------------------------------------------------------------------

float_inputs::float_inputs(const par::kernel& inner, std::string name,
                           std::shared_ptr<fire_log> log)
    : kernel_decorator(inner, std::move(name), std::move(log)) {
  info_.dtypes = {dtype::f64};
}

void float_inputs::forward(par::context& ctx, const par::run_case& c,
                           const par::forward_io& io) const {
  if (c.prob.type != dtype::f64) return inner_.forward(ctx, c, io);
  const off_meter hide(bytes_of(io.x) + bytes_of(io.ws));
  par::any_matrix x = io.x;
  matrices ws(io.ws.begin(), io.ws.end());
  bool changed = round_to_float(x);
  for (par::any_matrix& w : ws) changed = round_to_float(w) || changed;
  if (changed) fired();
  inner_.forward(ctx, c, par::forward_io{x, view(ws), io.y});
}

void float_inputs::backward(par::context& ctx, const par::run_case& c,
                            const par::backward_io& io) const {
  if (c.prob.type != dtype::f64) return inner_.backward(ctx, c, io);
  const off_meter hide(bytes_of(io.x) + bytes_of(io.ws) + bytes_of(io.dy));
  par::any_matrix x = io.x, dy = io.dy;
  matrices ws(io.ws.begin(), io.ws.end());
  bool changed = round_to_float(x);
  changed = round_to_float(dy) || changed;
  for (par::any_matrix& w : ws) changed = round_to_float(w) || changed;
  if (changed) fired();
  inner_.backward(ctx, c, par::backward_io{x, view(ws), dy, io.dx, io.dws});
}

// --- copies_w ---------------------------------------------------------------------------------

void copies_w::forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const {
  std::visit(
      [&](const auto& x) {
        using T = typename std::decay_t<decltype(x.data)>::value_type;
        std::vector<T> spare;  // the defect: global operator new, not the kernel's budget
        spare.reserve(bytes_of(io.ws) / sizeof(T));
        for (const par::any_matrix& w : io.ws) {
          const auto& m = std::get<par::matrix<T>>(w);
          spare.insert(spare.end(), m.data.begin(), m.data.end());
        }
        if (!spare.empty()) fired();
        inner_.forward(ctx, c, io);
        keep(spare);
      },
      io.x);
}

// --- last_w_rows_reversed ---------------------------------------------------------------------

namespace {
// Copies of ws with the last one's rows reversed; true if that changed its row order.
bool reverse_last_rows(matrices& ws) {
  if (ws.empty()) return false;
  return std::visit(
      [](auto& m) {
        if (m.rows < 2 || m.cols == 0) return false;
        for (std::size_t i = 0, j = m.rows - 1; i < j; ++i, --j)
          std::swap_ranges(m.row(i), m.row(i) + m.cols, m.row(j));
        return true;
      },
      ws.back());
}
}  // namespace

void last_w_rows_reversed::forward(par::context& ctx, const par::run_case& c,
                                   const par::forward_io& io) const {
  const off_meter hide(bytes_of(io.ws));
  matrices ws(io.ws.begin(), io.ws.end());
  if (reverse_last_rows(ws)) fired();
  inner_.forward(ctx, c, par::forward_io{io.x, view(ws), io.y});
}

void last_w_rows_reversed::backward(par::context& ctx, const par::run_case& c,
                                    const par::backward_io& io) const {
  const off_meter hide(bytes_of(io.ws));
  matrices ws(io.ws.begin(), io.ws.end());
  if (reverse_last_rows(ws)) fired();
  inner_.backward(ctx, c, par::backward_io{io.x, view(ws), io.dy, io.dx, io.dws});
}

// --- empty_shard_off_by_one -------------------------------------------------------------------

void empty_shard_off_by_one::forward(par::context& ctx, const par::run_case& c,
                                     const par::forward_io& io) const {
  inner_.forward(ctx, c, io);
  // Read from the case's partition, allocating nothing the memory meter would count.
  const auto m = c.parts.find("M");
  if (m == c.parts.end()) return;
  const std::vector<std::int64_t>& sizes = m->second.sizes();
  const bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
  if (!empty || m->second.length() == 0) return;
  std::visit(
      [&](auto& y) {
        if (y.rows == 0 || y.cols == 0) return;
        using T = typename std::decay_t<decltype(y.data)>::value_type;
        y.row(0)[0] = static_cast<T>(static_cast<double>(y.row(0)[0]) + 1.0);
        fired();
      },
      io.y);
}

// --- default_claims ---------------------------------------------------------------------------

par::claims default_claims::cost(const par::run_case& c, std::span<const int> coords) const {
  if (c.backend.algorithms.empty()) return inner_.cost(c, coords);
  par::run_case plain = c;
  plain.backend.algorithms = {};
  fired();
  return inner_.cost(plain, coords);
}

// --- hook subclasses --------------------------------------------------------------------------

namespace {
// A strategy under the mutant's name, with its fire_log.
template <class Base>
class renamed : public Base {
 public:
  template <class... A>
  renamed(std::string name, std::shared_ptr<fire_log> log, A&&... a)
      : Base(std::forward<A>(a)...), info_(Base::info()), log_(std::move(log)) {
    info_.name = std::move(name);
  }
  [[nodiscard]] const par::kernel_info& info() const override { return info_; }

 protected:
  void fired() const { ++log_->acts; }

 private:
  par::kernel_info info_;
  std::shared_ptr<fire_log> log_;
};

// Forward gathers all of W at once, whatever the bucket size: the inner forward runs on the case
// with an unbounded bucket, while cost() states the case's own buckets.
class ignores_bucket final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    if (par::plan_buckets(c).count > 1) fired();
    par::run_case whole = c;
    whole.params["bucket"] = std::numeric_limits<std::int64_t>::max();
    inner_.forward(ctx, whole, io);
  }
};

// Bucket i+1 gathered into bucket i's buffer before bucket i's products ran.
class reuses_buffer final : public renamed<par::sharded_weights> {
 public:
  using renamed::renamed;

 protected:
  [[nodiscard]] bool reuse_previous_buffer() const override {
    fired();
    return true;
  }
};

// Every buffer padded to a full bucket: within the bound (cost() follows buffer_rows), but a
// smaller bucket can raise the peak (a short last bucket padded to a large one).
class padded_buckets final : public renamed<par::sharded_weights> {
 public:
  using renamed::renamed;

 protected:
  [[nodiscard]] std::int64_t buffer_rows(const par::bucket_plan& b, std::int64_t i) const override {
    if (b.hi(i) - b.lo(i) != b.per_bucket) fired();
    return b.per_bucket;
  }
};

// Each W panel broadcast from the next mesh row.
class w_panel_wrong_row final : public renamed<par::summa> {
 public:
  using renamed::renamed;

 protected:
  [[nodiscard]] int w_panel_root(int panel_owner, int rows) const override {
    if (rows > 1) fired();
    return (panel_owner + 1) % rows;
  }
};

// 1F1B keeping every micro-batch's activations until the step ends (GPipe's memory).
class keeps_activations final : public renamed<par::pipeline> {
 public:
  using renamed::renamed;

 protected:
  [[nodiscard]] bool free_activations_early() const override {
    fired();
    return false;
  }
};

// dW all-reduced over the whole mesh instead of the dp axis.
class dw_over_world final : public renamed<par::pipeline> {
 public:
  using renamed::renamed;

 protected:
  [[nodiscard]] par::comm& dw_comm(par::mesh& grid) const override {
    if (grid.all().size() != grid.axis(0).size()) fired();
    return grid.all();
  }
};
}  // namespace

std::unique_ptr<par::kernel> make_subclass(const std::string& op, const par::kernel* host,
                                           const std::string& name, std::shared_ptr<fire_log> log) {
  using par::pipeline_schedule;
  if (op == "ignores_bucket")
    return host != nullptr ? std::make_unique<ignores_bucket>(*host, name, std::move(log))
                           : nullptr;
  if (op == "reuses_buffer") return std::make_unique<reuses_buffer>(name, std::move(log));
  if (op == "padded_buckets") return std::make_unique<padded_buckets>(name, std::move(log));
  if (op == "w_panel_wrong_row") return std::make_unique<w_panel_wrong_row>(name, std::move(log));
  if (op == "keeps_activations")
    return std::make_unique<keeps_activations>(name, std::move(log), pipeline_schedule::one_f_one_b,
                                               false);
  if (op == "dw_over_world")
    return std::make_unique<dw_over_world>(name, std::move(log), pipeline_schedule::one_f_one_b,
                                           true);
  return nullptr;
}

}  // namespace shardcheck::prop::mutants
