#include "mutants/mixed.hpp"

#include <cstddef>
#include <utility>

#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/mixed.hpp"

namespace shardcheck::prop::mutants {

namespace {

// The host's info for bf16 / f16 under acc=f32 reduce=f32 only, Y all-reduced (scatter=0).
void storage_only(par::kernel_info& info) {
  info.dtypes = {dtype::bf16, dtype::f16};
  info.policies = {par::f32_policy};
  for (par::param_spec& ps : info.params)
    if (ps.name == "scatter") ps.min = ps.max = ps.fallback = 0;
}

// Y = X_r·W_rᵀ on this rank's K-share, the f32 partial from `local`, all-reduced in f32 and
// rounded to T: row_parallel's forward at scatter=0, with the defect inside `local`.
template <class T, class F>
void row_parallel_forward(par::context& ctx, const par::run_case& c, const par::matrix<T>& x,
                          par::weights<T> w, par::matrix<T>& y, F local) {
  par::comm& world = ctx.grid.axis(0);
  const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
  const auto kr = static_cast<std::size_t>(c.part("K").size(world.rank()));
  y = par::matrix<T>(m, n);
  par::matrix<float> partial(m, n);
  local(m, n, kr, x.data.data(), w[0].data.data(), partial.data.data());
  world.all_reduce_sum<float>(partial.span());
  ref::narrow<T>(partial.data.data(), partial.data.size(), y.data.data());
}

}  // namespace

partials_in_storage::partials_in_storage(const par::kernel& inner, std::string name,
                                         std::shared_ptr<fire_log> log)
    : kernel_decorator(inner, std::move(name), std::move(log)) {
  storage_only(info_);
}

void partials_in_storage::forward(par::context& ctx, const par::run_case& c,
                                  const par::forward_io& io) const {
  io.visit_mixed([&]<class T>(const par::matrix<T>& x, par::weights<T> w, par::matrix<T>& y) {
    if constexpr (!is_16bit_v<T>) {
      inner_.forward(ctx, c, io);
    } else {
      row_parallel_forward<T>(
          ctx, c, x, w, y,
          [&](std::size_t m, std::size_t n, std::size_t k, const T* xs, const T* ws, float* out) {
            par::matrix<float> xa(m, k), wa(n, k);
            ref::widen<T>(xs, m * k, xa.data.data());
            ref::widen<T>(ws, n * k, wa.data.data());
            ref::linear_forward<float>(c.prob.layout, m, n, k, xa.data.data(), wa.data.data(), out);
            // The defect: the partial rounded to T before it travels.
            bool changed = false;
            for (std::size_t i = 0; i < m * n; ++i) {
              const auto r = static_cast<float>(static_cast<T>(out[i]));
              changed = changed || r != out[i];
              out[i] = r;
            }
            if (changed) fired();
          });
    }
  });
}

namespace {
// c with its partials reduced in the storage dtype (a 16-bit case), else c.
par::run_case storage_reduced(const par::run_case& c) {
  par::run_case out = c;
  if (is_storage16(c.prob.type)) out.policy.reduce = c.prob.type;
  return out;
}
}  // namespace

storage_path::storage_path(const par::kernel& inner, std::string name,
                           std::shared_ptr<fire_log> log)
    : kernel_decorator(inner, std::move(name), std::move(log)) {
  storage_only(info_);
}

namespace {
bool same_case(const par::run_case& a, const par::run_case& b) {
  return a.strategy == b.strategy && a.p == b.p && a.seed == b.seed && a.mode == b.mode &&
         a.prob.M == b.prob.M && a.prob.N == b.prob.N && a.prob.K == b.prob.K &&
         a.prob.hidden == b.prob.hidden && a.prob.type == b.prob.type &&
         a.prob.layout == b.prob.layout && a.prob.act == b.prob.act && a.policy == b.policy &&
         a.params == b.params && a.parts == b.parts && a.backend.kind == b.backend.kind &&
         a.backend.algorithms.same_as(b.backend.algorithms);
}
}  // namespace

const par::run_case& storage_path::as_run(const par::run_case& c) const {
  if (!same_case(c, last_)) {
    last_ = c;
    shadow_ = storage_reduced(c);
  }
  return shadow_;
}

par::claims storage_path::cost(const par::run_case& c, std::span<const int> coords) const {
  return inner_.cost(as_run(c), coords);
}

void storage_path::forward(par::context& ctx, const par::run_case& c,
                           const par::forward_io& io) const {
  if (is_storage16(c.prob.type) && c.p > 1) fired();
  inner_.forward(ctx, as_run(c), io);
}

void storage_path::backward(par::context& ctx, const par::run_case& c,
                            const par::backward_io& io) const {
  if (is_storage16(c.prob.type) && c.p > 1) fired();
  inner_.backward(ctx, as_run(c), io);
}

acc_in_storage::acc_in_storage(const par::kernel& inner, std::string name,
                               std::shared_ptr<fire_log> log)
    : kernel_decorator(inner, std::move(name), std::move(log)) {
  storage_only(info_);
}

void acc_in_storage::forward(par::context& ctx, const par::run_case& c,
                             const par::forward_io& io) const {
  io.visit_mixed([&]<class T>(const par::matrix<T>& x, par::weights<T> w, par::matrix<T>& y) {
    if constexpr (!is_16bit_v<T>) {
      inner_.forward(ctx, c, io);
    } else {
      const bool out_in = c.prob.layout == weight_layout::out_in;
      row_parallel_forward<T>(
          ctx, c, x, w, y,
          [&](std::size_t m, std::size_t n, std::size_t k, const T* xs, const T* ws, float* out) {
            bool rounded = false;
            for (std::size_t i = 0; i < m; ++i)
              for (std::size_t j = 0; j < n; ++j) {
                // The defect: every addition of the local contraction rounds to T.
                T sum(0.0f);
                float exact = 0.0f;
                for (std::size_t q = 0; q < k; ++q) {
                  const float prod = static_cast<float>(xs[i * k + q]) *
                                     static_cast<float>(out_in ? ws[j * k + q] : ws[q * n + j]);
                  sum = static_cast<T>(static_cast<float>(sum) + prod);
                  exact += prod;
                }
                out[i * n + j] = static_cast<float>(sum);
                rounded = rounded || static_cast<float>(sum) != exact;
              }
            if (rounded) fired();
          });
    }
  });
}

}  // namespace shardcheck::prop::mutants
