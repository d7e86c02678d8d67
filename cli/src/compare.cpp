#include "compare.hpp"

#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "plotting.hpp"
#include "runner.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/footprint.hpp"
#include "shardcheck/properties/harness.hpp"
#include "shardcheck/properties/verdict.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::compare {

namespace {

using json = nlohmann::ordered_json;
using par::any_matrix;
using par::tensor;
using par::tensor_slot;
using prop::human_bytes;

struct usage_error : error {
  using error::error;
};

// --- the time spent inside communication --------------------------------------------------------

// Seconds this rank spent inside its comms' calls while `running`: a layer above the checker of
// every comm of the measured mesh (stack_options::wrap) adds each call's wall time, so a blocking
// receive counts the time its rank sat waiting and a started collective the time waited for it.
struct comm_clock {
  bool running = false;
  double seconds = 0;
};

class timed_layer final : public par::collectives {
 public:
  timed_layer(std::unique_ptr<par::collectives> inner, comm_clock& clock)
      : inner_(std::move(inner)), clock_(clock) {}
  [[nodiscard]] int rank() const override { return inner_->rank(); }
  [[nodiscard]] int size() const override { return inner_->size(); }
  [[nodiscard]] MPI_Comm native_handle() const override { return inner_->native_handle(); }

 private:
  template <class F>
  auto timed(F&& f) {
    if (!clock_.running) return f();
    const double t0 = MPI_Wtime();
    auto r = f();
    clock_.seconds += MPI_Wtime() - t0;
    return r;
  }

 public:
  par::traffic run(const par::call& c) override {
    return timed([&] { return inner_->run(c); });
  }
  void start(const par::call& c) override {
    timed([&] {
      inner_->start(c);
      return 0;
    });
  }
  bool test() override {
    return timed([&] { return inner_->test(); });
  }
  par::traffic wait() override {
    return timed([&] { return inner_->wait(); });
  }
  [[nodiscard]] MPI_Request send(const par::message& m) override {
    return timed([&] { return inner_->send(m); });
  }
  void wait_send(MPI_Request& r) override {
    timed([&] {
      inner_->wait_send(r);
      return 0;
    });
  }
  std::int64_t recv(const par::message& m) override {
    return timed([&] { return inner_->recv(m); });
  }

 private:
  std::unique_ptr<par::collectives> inner_;
  comm_clock& clock_;
};

// The case's stack with the subject's layers (a mutant's faults) and the clock above them all.
par::stack_options timed_stack(par::backend b, const par::layer_wrapper& wrap, comm_clock& clock) {
  return par::stack_options{b, [&clock, wrap](std::unique_ptr<par::collectives> inner,
                                              par::layer_position where, int axis) {
                              if (wrap) inner = wrap(std::move(inner), where, axis);
                              if (where == par::layer_position::below) return inner;
                              return std::unique_ptr<par::collectives>(
                                  std::make_unique<timed_layer>(std::move(inner), clock));
                            }};
}

// --- small helpers ------------------------------------------------------------------------------

[[nodiscard]] double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

void max_all(double* v, int n) {
  par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                 "compare: max over ranks");
}

// Every rank's value, on every rank.
[[nodiscard]] std::vector<double> gather_all(double v) {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  std::vector<double> out(static_cast<std::size_t>(p));
  par::check_mpi(MPI_Allgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD),
                 "compare: gather over ranks");
  return out;
}

void barrier() { par::check_mpi(MPI_Barrier(MPI_COMM_WORLD), "compare: barrier"); }

// "12.34 ms": every time the table prints (ci/readme_outputs.py sets such columns aside).
[[nodiscard]] std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", seconds * 1e3);
  return buf;
}

using cli_tools::progress;

// --- calibration: the α–β link and the GEMM rate ----------------------------------------------

struct calibration {
  double alpha = 0, beta = 0, gemm_rate = 0;  // s per message, bytes/s per link, flop/s
  // A collective's own: from the all-reduces of the probe (its reduction and steps included),
  // else α and β.
  double alpha_coll = 0, beta_coll = 0;
  bool alpha_probed = false, beta_probed = false, gemm_probed = false;
  json probe = json::object();  // what the probe measured
};

// One-way time of a ping-pong of `bytes` between ranks 0 and 1 (median of `trips`).
double ping_pong(std::size_t bytes, int trips) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<char> buf(std::max<std::size_t>(bytes, 1));
  std::vector<double> t;
  const int n = static_cast<int>(bytes);
  for (int i = 0; i < trips; ++i) {
    barrier();
    const double t0 = MPI_Wtime();
    if (rank == 0) {
      par::check_mpi(MPI_Send(buf.data(), n, MPI_BYTE, 1, 7, MPI_COMM_WORLD), "probe send");
      par::check_mpi(MPI_Recv(buf.data(), n, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                     "probe recv");
    } else if (rank == 1) {
      par::check_mpi(MPI_Recv(buf.data(), n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                     "probe recv");
      par::check_mpi(MPI_Send(buf.data(), n, MPI_BYTE, 0, 7, MPI_COMM_WORLD), "probe send");
    }
    t.push_back((MPI_Wtime() - t0) / 2);
  }
  double m = median(t);
  par::check_mpi(MPI_Bcast(&m, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), "probe result");
  return m;
}

// Slowest rank's time of an all-reduce of n doubles (median of `reps`).
double all_reduce_time(std::int64_t n, int reps) {
  std::vector<double> buf(static_cast<std::size_t>(n), 1.0), t;
  for (int i = 0; i < reps; ++i) {
    barrier();
    const double t0 = MPI_Wtime();
    par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                                 MPI_COMM_WORLD),
                   "probe all-reduce");
    double dt = MPI_Wtime() - t0;
    max_all(&dt, 1);
    t.push_back(dt);
  }
  return median(t);
}

// Every rank at once runs a GEMM of about this rank's share of the step (M/p × N × K, at most
// 2·10⁹ flops): the rate under the contention the strategies meet. The slowest rank's rate.
template <class T>
double gemm_probe(std::int64_t m, std::int64_t n, std::int64_t k) {
  n = std::max<std::int64_t>(n, 1);
  k = std::max<std::int64_t>(k, 1);
  const double cap = 2e9 / (2.0 * static_cast<double>(n) * static_cast<double>(k));
  m = std::clamp<std::int64_t>(m, 1, std::max<std::int64_t>(1, static_cast<std::int64_t>(cap)));
  std::vector<T> a(static_cast<std::size_t>(m * k), T(0.5)),
      b(static_cast<std::size_t>(n * k), T(0.25)), c(static_cast<std::size_t>(m * n));
  const auto run = [&] {
    ref::gemm<T>(false, true, static_cast<std::size_t>(m), static_cast<std::size_t>(n),
                 static_cast<std::size_t>(k), T(1), a.data(), static_cast<std::size_t>(k), b.data(),
                 static_cast<std::size_t>(k), T(0), c.data(), static_cast<std::size_t>(n));
  };
  run();  // warm
  std::vector<double> times;
  for (int i = 0; i < 3; ++i) {  // the median of three: one slice of a busy machine is noise
    barrier();
    const double t0 = MPI_Wtime();
    run();
    double dt = MPI_Wtime() - t0;
    max_all(&dt, 1);
    times.push_back(dt);
  }
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         median(times);
}

calibration calibrate(const options& o, const problem& prob, int p, par::backend b) {
  calibration cal;
  cal.alpha = o.alpha;
  cal.beta = o.beta;
  cal.gemm_rate = o.gemm_rate;
  if (p >= 2 && (o.alpha < 0 || o.beta < 0)) {
    const std::size_t big = std::size_t{4} << 20;
    const double t_small = ping_pong(8, 30), t_big = ping_pong(big, 8);
    // β from the time the large message takes beyond the latency; should noise leave no time
    // beyond it, from the large message's whole time (a lower bound on the bandwidth), never
    // from a made-up floor.
    const double a = t_small;
    const double bw = static_cast<double>(big) / (t_big > a ? t_big - a : t_big);
    if (o.alpha < 0) {
      cal.alpha = a;
      cal.alpha_probed = true;
    }
    if (o.beta < 0) {
      cal.beta = bw;
      cal.beta_probed = true;
    }
    cal.probe["ping_pong"] = {{"bytes", json::array({8, big})},
                              {"one_way_s", json::array({t_small, t_big})}};
    // All-reduces of two sizes: the point-to-point model's prediction of them from their ledger
    // bytes, and the collectives' own α and β fitted to them (Open MPI's algorithm is unknown,
    // its reduction and steps included).
    json ar = json::array();
    double t[2] = {0, 0}, bytes[2] = {0, 0};
    int i = 0;
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{1} << 19}) {
      t[i] = all_reduce_time(n, n > 1 ? 8 : 30);
      const par::ledger_entry e = par::all_reduce_entry(b, n, 0, p, sizeof(double));
      bytes[i] = static_cast<double>(std::max(e.bytes_sent, e.bytes_received));
      ar.push_back({{"elements", n},
                    {"measured_s", t[i]},
                    {"point_to_point_model_s", cal.alpha + bytes[i] / cal.beta}});
      ++i;
    }
    cal.probe["all_reduce"] = ar;
    if (o.alpha < 0 && o.beta < 0) {
      // The larger all-reduce must have taken longer, else the fit says nothing and the
      // collectives fall back to α and β below (beta_coll stays 0).
      if (t[1] > t[0]) {
        cal.alpha_coll = t[0];
        cal.beta_coll = (bytes[1] - bytes[0]) / (t[1] - t[0]);
      }
    }
  }
  if (cal.beta_coll <= 0) {
    cal.alpha_coll = cal.alpha;
    cal.beta_coll = cal.beta;
  }
  if (p < 2) {
    cal.alpha = cal.alpha_coll = std::max(cal.alpha, 0.0);
    if (cal.beta <= 0) cal.beta = 1e30;  // nothing leaves a single rank
    cal.beta_coll = cal.beta;
  }
  if (o.gemm_rate < 0) {
    const std::int64_t m = (prob.M + p - 1) / p;
    const std::int64_t k = prob.K, n = prob.layers() > 1 ? prob.hidden.front() : prob.N;
    cal.gemm_rate =
        // bf16 / f16 products are summed in f32 (sgemm on widened blocks).
        prob.type == dtype::f64 ? gemm_probe<double>(m, n, k) : gemm_probe<float>(m, n, k);
    cal.gemm_probed = true;
    cal.probe["gemm"] = {
        {"dtype", prob.type == dtype::f64 ? "f64" : "f32"}, {"M", m}, {"N", n}, {"K", k}};
  }
  return cal;
}

// --- the cost model's time ----------------------------------------------------------------------

// Whether k runs micro-batches through stages (a pipeline, or the hybrid mesh): its mesh is
// (dp, pp, tp) and it takes m.
[[nodiscard]] bool is_pipeline(const par::kernel& k) {
  for (const auto& ps : k.info().params)
    if (ps.name == "m") return true;
  return false;
}

struct prediction {
  double compute = 0, comm = 0, time = 0;  // of the slowest rank
  double bubble = 0;                       // (pp − 1)/(m + pp − 1) for a pipeline, else 0
  std::vector<double> per_rank;            // predicted seconds per rank
  std::vector<double> flops;               // per rank, one step
};

// The flops of one step on every rank: layer l (6·M·d_{l−1}·d_l: forward, dX and dW) shared
// evenly by the ranks that hold a part of W_l. Example: data_parallel, row_parallel, SUMMA on
// p = 2 at 2048³: 6·2048³/2 each; a pipeline of 2 stages over 2 layers: stage s the whole of
// layer s + 1; the hybrid mesh: a layer over the dp·tp ranks of its stage. Uneven partitions
// and redundant work are not modelled.
std::vector<double> step_flops(const par::kernel& k, const par::run_case& c) {
  const std::vector<std::int64_t> d = c.prob.widths();
  const auto dims = k.mesh_dims(c);
  const std::size_t layers = d.size() - 1;
  std::vector<std::vector<bool>> holds(static_cast<std::size_t>(c.p), std::vector<bool>(layers));
  std::vector<int> sharing(layers, 0);
  for (int r = 0; r < c.p; ++r) {
    const par::case_plan plan = par::plan_of(k, c, par::coords_of(r, dims));
    for (std::size_t l = 0; l < layers; ++l) {
      const par::block& w = plan[tensor_slot{tensor::w, l}].region;
      const bool h = w.rows > 0 && w.cols > 0;
      holds[static_cast<std::size_t>(r)][l] = h;
      sharing[l] += h ? 1 : 0;
    }
  }
  std::vector<double> out(static_cast<std::size_t>(c.p), 0.0);
  for (int r = 0; r < c.p; ++r)
    for (std::size_t l = 0; l < layers; ++l)
      if (holds[static_cast<std::size_t>(r)][l])
        out[static_cast<std::size_t>(r)] += 6.0 * static_cast<double>(c.prob.M) *
                                            static_cast<double>(d[l]) *
                                            static_cast<double>(d[l + 1]) / sharing[l];
  return out;
}

// α + max(sent, received)/β per message of the step, with the collectives' own α and β for a
// collective.
double comm_seconds(const std::vector<par::ledger_entry>& entries, const calibration& cal) {
  double t = 0;
  for (const par::ledger_entry& e : entries) {
    const bool p2p = e.kind == par::collective::send || e.kind == par::collective::recv;
    t += (p2p ? cal.alpha : cal.alpha_coll) +
         static_cast<double>(std::max(e.bytes_sent, e.bytes_received)) /
             (p2p ? cal.beta : cal.beta_coll);
  }
  return t;
}

prediction predict(const par::kernel& k, const par::run_case& c, const calibration& cal) {
  prediction pr;
  const auto dims = k.mesh_dims(c);
  if (is_pipeline(k) && dims.size() == 3) {
    const double stages = dims[1], micro = static_cast<double>(c.param("m"));
    pr.bubble = (stages - 1) / (micro + stages - 1);
  }
  pr.flops = step_flops(k, c);
  for (int r = 0; r < c.p; ++r) {
    const par::claims cl = k.cost(c, par::coords_of(r, dims));
    const double f = pr.flops[static_cast<std::size_t>(r)];
    const double compute = f / cal.gemm_rate / (1 - pr.bubble);
    double comm = 0;
    if (cl.collectives)
      comm =
          comm_seconds(cl.collectives->forward, cal) + comm_seconds(cl.collectives->backward, cal);
    pr.per_rank.push_back(compute + comm);
    if (compute + comm >= pr.time) {
      pr.time = compute + comm;
      pr.compute = compute;
      pr.comm = comm;
    }
  }
  return pr;
}

// --- the single-device reference ----------------------------------------------------------------

// The whole problem on one device: inputs, and the outputs of one step.
template <class T>
struct whole {
  par::matrix<T> x, dy;
  std::vector<par::matrix<T>> ws;
  par::matrix<T> y, dx;
  std::vector<par::matrix<T>> dws;
};

template <class T>
whole<T> whole_inputs(const par::run_case& c) {
  const problem& p = c.prob;
  const std::vector<std::int64_t> d = p.widths();
  const bool out_in = p.layout == weight_layout::out_in;
  whole<T> w;
  w.x = prop::case_values<T>(c, {tensor::x, 0}, 0, p.M, 0, p.K);
  w.dy = prop::case_values<T>(c, {tensor::dy, 0}, 0, p.M, 0, p.N);
  for (std::size_t l = 0; l + 1 < d.size(); ++l)
    w.ws.push_back(prop::case_values<T>(c, {tensor::w, l}, 0, out_in ? d[l + 1] : d[l], 0,
                                        out_in ? d[l] : d[l + 1]));
  return w;
}

// A bf16 / f16 problem's inputs widened to f32 (exactly).
template <class T>
whole<float> widened(const whole<T>& w) {
  const auto wide = [](const par::matrix<T>& m) {
    par::matrix<float> out(m.rows, m.cols);
    ref::widen<T>(m.data.data(), m.data.size(), out.data.data());
    return out;
  };
  whole<float> f;
  f.x = wide(w.x);
  f.dy = wide(w.dy);
  for (const auto& wl : w.ws) f.ws.push_back(wide(wl));
  return f;
}

template <class T>
void reference_step_typed(const par::run_case& c, whole<T>& w);

// One training step of the whole problem: Y, then dX and every dW (a stack through its hidden
// pre-activations, with the activation between layers).
template <class T>
void reference_step(const par::run_case& c, whole<T>& w) {
  if constexpr (is_16bit_v<T>) {
    // A single device's bf16 / f16 step: the inputs widened, summed in f32, rounded once.
    whole<float> f = widened(w);
    reference_step<float>(c, f);
    const auto narrow = [](const par::matrix<float>& from, par::matrix<T>& to) {
      to = par::matrix<T>(from.rows, from.cols);
      ref::narrow<T>(from.data.data(), from.data.size(), to.data.data());
    };
    narrow(f.y, w.y);
    narrow(f.dx, w.dx);
    w.dws.resize(f.dws.size());
    for (std::size_t l = 0; l < f.dws.size(); ++l) narrow(f.dws[l], w.dws[l]);
  } else {
    reference_step_typed(c, w);
  }
}

template <class T>
void reference_step_typed(const par::run_case& c, whole<T>& w) {
  const problem& p = c.prob;
  const std::vector<std::int64_t> d = p.widths();
  const auto M = static_cast<std::size_t>(p.M);
  const auto sz = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  w.y = par::matrix<T>(M, sz(p.N));
  w.dx = par::matrix<T>(M, sz(p.K));
  w.dws.clear();
  for (const auto& wl : w.ws) w.dws.emplace_back(wl.rows, wl.cols);
  if (p.layers() == 1) {
    ref::linear_forward<T>(p.layout, M, sz(p.N), sz(p.K), w.x.data.data(), w.ws[0].data.data(),
                           w.y.data.data());
    ref::linear_backward_dx<T>(p.layout, M, sz(p.N), sz(p.K), w.dy.data.data(), w.ws[0].data.data(),
                               w.dx.data.data());
    ref::linear_backward_dw<T>(p.layout, M, sz(p.N), sz(p.K), w.dy.data.data(), w.x.data.data(),
                               w.dws[0].data.data());
    return;
  }
  const ref::stack_shape shape{p.layout, d, p.act};
  std::vector<const T*> ptrs;
  for (const auto& wl : w.ws) ptrs.push_back(wl.data.data());
  std::vector<std::vector<T>> hidden;
  ref::stack_forward<T>(shape, M, w.x.data.data(), ptrs, w.y.data.data(), &hidden);
  std::vector<T> g(w.dy.data.begin(), w.dy.data.end()), next, a;
  for (std::size_t l = shape.layers(); l-- > 0;) {
    const std::size_t in = sz(d[l]), out = sz(d[l + 1]);
    const T* input = w.x.data.data();
    if (l > 0) {
      a.assign(hidden[l - 1].begin(), hidden[l - 1].end());
      ref::activate<T>(p.act, std::span<T>(a));
      input = a.data();
    }
    ref::linear_backward_dw<T>(p.layout, M, out, in, g.data(), input, w.dws[l].data.data());
    T* target = l == 0 ? w.dx.data.data() : (next.assign(M * in, T(0)), next.data());
    ref::linear_backward_dx<T>(p.layout, M, out, in, g.data(), w.ws[l].data.data(), target);
    if (l > 0) {
      ref::activate_backward<T>(p.act, std::span<const T>(hidden[l - 1]), std::span<T>(next));
      g.swap(next);
    }
  }
}

// Expected outputs (prop::verdict.hpp): a single layer's whole references, shared by every
// strategy, or a stack's whole reference with each element's bounds for one strategy's chains.
struct expected_outputs {
  std::vector<prop::block_reference> single;             // Y, dX, dW
  std::optional<ref::stack_expectation<float>> stack32;  // f32, and bf16 / f16 in f32
  std::optional<ref::stack_expectation<double>> stack64;
  // Block b of output t (plan order: Y, dX, dW_1 …).
  [[nodiscard]] prop::block_reference block(const par::run_case& c, std::size_t i, tensor_slot t,
                                            const par::block& b) const {
    if (!single.empty()) return prop::slice_of(c, t, b, single.at(i));
    return stack32 ? prop::slice_stack(c, t, b, *stack32) : prop::slice_stack(c, t, b, *stack64);
  }
};

// A stack's expectation for one strategy's chains: the values and per-element bounds of both
// tiers (what verify judges the same stack by). `claimed`: the strategy claims its chains.
expected_outputs expect_stack(const par::run_case& c, const std::vector<par::chain_lengths>& chains,
                              bool claimed) {
  const double lambda = prop::tier_of(c, chains, true, true, claimed, false).lambda;
  expected_outputs e;
  if (is_storage16(c.prob.type)) {
    e.stack32 = prop::mixed_stack_reference(c, chains, lambda);
    // The magnitudes are not read: the bounds are what compare judges by.
    std::vector<double>().swap(e.stack32->y_mag);
    std::vector<double>().swap(e.stack32->dx_mag);
    e.stack32->dw_mag.clear();
  } else if (c.prob.type == dtype::f32) {
    e.stack32 = prop::whole_stack_reference<float>(c, chains, lambda);
  } else {
    e.stack64 = prop::whole_stack_reference<double>(c, chains, lambda);
  }
  return e;
}

// --- one strategy's measurements ----------------------------------------------------------------

struct error_audit {
  double err_u_mag = 0;    // max |got − expected| / (u·mag) (single layer only)
  double bound_share = 0;  // max |got − expected| / bound
  double stat_share = 0;   // max |got − expected| / the statistical tier's bound (0: off)
  bool finite = true;      // every output finite where expected is
};

// This rank's output blocks judged against the expected whole outputs (prop::judge_block).
void audit_blocks(const par::case_plan& plan, const par::run_case& c, const par::claims& cl,
                  const std::vector<any_matrix>& got, const expected_outputs& e, error_audit& a) {
  const std::vector<par::chain_lengths> chains =
      cl.chains ? *cl.chains : std::vector<par::chain_lengths>(c.prob.layers());
  const prop::statistical_tier tier =
      prop::tier_of(c, chains, true, true, cl.chains.has_value(), prop::placed_partial(plan));
  for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
    const tensor_slot t = plan.outputs[i];
    const par::block& b = plan[t].region;
    if (b.rows == 0 || b.cols == 0) continue;
    if (static_cast<std::int64_t>(par::rows_of(got[i])) != b.rows ||
        static_cast<std::int64_t>(par::cols_of(got[i])) != b.cols) {
      a.finite = false;
      continue;
    }
    const prop::judgement j =
        prop::judge_block(prop::tolerance_of(c, chains, t.t, tier), got[i], e.block(c, i, t, b));
    if (c.prob.layers() == 1) a.err_u_mag = std::max(a.err_u_mag, j.worst.err_u_mag);
    a.bound_share = std::max(a.bound_share, j.worst.rigorous);
    a.stat_share = std::max(a.stat_share, j.worst.statistical);
    a.finite = a.finite && j.nonfinite == 0;
  }
}

struct measured {
  std::string name;
  const par::kernel* k = nullptr;
  par::layer_wrapper wrap;  // a mutant's fault layers; empty for a kernel
  par::run_case c;
  std::vector<double> reps, comm_reps;  // slowest rank's step time, largest comm time
  // per rank (gathered): ledger bytes of one step, inputs held, measured peak above them
  std::vector<double> sent, received, inputs, peak, bound;
  bool ledger_matches = false, peak_claimed = false, peak_over_bound = false;
  error_audit err;
  prediction pred;
};

// One step of the strategy, timed; returns {step seconds, comm seconds} of this rank. With `log`,
// records the ledger and measures each phase's peak into peak (the first, untimed run).
struct step_result {
  double seconds = 0, comm = 0;
  std::int64_t peak = 0;
  std::vector<any_matrix> outputs;  // Y, dX, dW_1…: in plan.outputs order
};

step_result run_step(const measured& s, par::ledger* log, bool keep) {
  comm_clock clock;
  par::comm world = par::comm::world();
  par::mesh grid(world, s.k->mesh_dims(s.c), timed_stack(s.c.backend, s.wrap, clock));
  const par::case_plan plan = par::plan_of(*s.k, s.c, grid.coords());
  const prop::rank_inputs in = prop::inputs_of(plan, s.c);
  step_result r;
  any_matrix y, dx;
  std::vector<any_matrix> dws(in.ws.size());
  par::context ctx{grid};
  // The first step records as verify does: the comms' calls and the kernel's raw MPI calls on
  // the mesh's communicators (pmpi.hpp), the whole mesh as axis −1.
  std::optional<par::pmpi::recording> raw;
  barrier();  // before the recording: compare's own, on the world every mesh axis may match
  if (log != nullptr) {
    grid.attach(log, true);
    std::vector<par::pmpi::tracked_comm> comms{{grid.all().native_handle(), -1}};
    for (int a = 0; a < static_cast<int>(grid.dims().size()); ++a)
      comms.push_back({grid.axis(a).native_handle(), a});
    raw.emplace(*log, true, comms);
    log->set_phase(par::phase::forward);
  }
  clock.running = true;
  const double t0 = MPI_Wtime();
  std::int64_t peak = 0;
  {
    mem::peak_scope scope;
    s.k->forward(ctx, s.c, par::forward_io{in.x, in.ws, y});
    peak = static_cast<std::int64_t>(scope.peak());
  }
  if (log != nullptr) log->set_phase(par::phase::backward);
  {
    mem::peak_scope scope;
    s.k->backward(ctx, s.c, par::backward_io{in.x, in.ws, in.dy, dx, dws});
    peak = std::max(peak, static_cast<std::int64_t>(scope.peak()));
  }
  r.seconds = MPI_Wtime() - t0;
  clock.running = false;
  r.comm = clock.seconds;
  r.peak = peak;
  raw.reset();
  grid.attach(nullptr, false);
  if (keep) {
    for (const tensor_slot& t : plan.outputs)
      r.outputs.push_back(t.t == tensor::y    ? std::move(y)
                          : t.t == tensor::dx ? std::move(dx)
                                              : std::move(dws[t.layer]));
  }
  return r;
}

// The untimed first step: ledger, peak, inputs held, claims, the error audit.
void first_step(measured& s, const expected_outputs* single) {
  par::ledger log;
  const auto coords = par::coords_of(par::comm::world().rank(), s.k->mesh_dims(s.c));
  const par::claims cl = s.k->cost(s.c, coords);
  if (cl.collectives) log.reserve(cl.collectives->forward.size() + cl.collectives->backward.size());
  step_result r = run_step(s, &log, true);
  double sent = 0, received = 0;
  for (const par::ledger_entry& e : log.entries()) {
    sent += static_cast<double>(e.bytes_sent);
    received += static_cast<double>(e.bytes_received);
  }
  bool matches = false;
  if (cl.collectives) {
    std::vector<par::ledger_entry> want;
    for (auto [when, list] : {std::pair{par::phase::forward, &cl.collectives->forward},
                              std::pair{par::phase::backward, &cl.collectives->backward}})
      for (par::ledger_entry e : *list) {
        e.when = when;
        want.push_back(e);
      }
    matches = want == log.entries();
  }
  const par::case_plan plan = par::plan_of(*s.k, s.c, coords);
  std::int64_t inputs = 0;
  for (const par::tensor_plan& t : plan.tensors)
    if (t.is_input())
      inputs += t.region.rows * t.region.cols * static_cast<std::int64_t>(size_of(s.c.prob.type));
  s.sent = gather_all(sent);
  s.received = gather_all(received);
  s.inputs = gather_all(static_cast<double>(inputs));
  s.peak = gather_all(static_cast<double>(r.peak));
  double over = cl.peak && r.peak > std::max(cl.peak->forward, cl.peak->backward) ? 1 : 0;
  max_all(&over, 1);
  s.peak_over_bound = over != 0;
  s.peak_claimed = cl.peak.has_value();
  s.bound = gather_all(cl.peak ? static_cast<double>(std::max(cl.peak->forward, cl.peak->backward))
                               : 0.0);
  double all_match = matches ? 0 : 1;
  max_all(&all_match, 1);
  s.ledger_matches = all_match == 0;
  // The error: a single layer against the shared expectation, a stack against its own (its
  // bound depends on the strategy's chains).
  error_audit a;
  if (single != nullptr) {
    audit_blocks(plan, s.c, cl, r.outputs, *single, a);
  } else {
    const std::vector<par::chain_lengths> chains =
        cl.chains ? *cl.chains : std::vector<par::chain_lengths>(s.c.prob.layers());
    audit_blocks(plan, s.c, cl, r.outputs, expect_stack(s.c, chains, cl.chains.has_value()), a);
  }
  double v[4] = {a.err_u_mag, a.bound_share, a.stat_share, a.finite ? 0.0 : 1.0};
  max_all(v, 4);
  s.err = {v[0], v[1], v[2], v[3] == 0};
}

// --- output: the table, the JSON, the plots -----------------------------------------------------

[[nodiscard]] double max_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

[[nodiscard]] std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct reference_run {
  std::vector<double> reps;
  std::int64_t inputs = 0, peak = 0;  // bytes: the whole problem's inputs, the step's outputs
  double flops = 0;
  double predicted = 0;
};

// A ratio the table prints: 2 decimals, or 3 significant digits past a million (a mutant's).
[[nodiscard]] std::string ratio(double v) { return fmt(v < 1e6 ? "%.2f" : "%.2e", v); }

std::string table(const std::vector<measured>& all, const reference_run& ref_run) {
  std::ostringstream os;
  int width = 24;
  for (const measured& s : all) width = std::max(width, static_cast<int>(s.name.size()));
  char line[512];
  std::snprintf(line, sizeof line,
                "%-*s %11s %11s %11s %11s  %10s %10s  %10s %10s  %6s  %9s %6s %6s\n", width,
                "strategy", "time", "compute", "comm", "predicted", "sent/rank", "recv/rank",
                "memory/rank", "bound", "bubble", "err/u·mag", "bound%", "stat%");
  os << line;
  const double t_ref = median(ref_run.reps);
  std::snprintf(line, sizeof line,
                "%-*s %11s %11s %11s %11s  %10s %10s  %10s %10s  %6s  %9s %6s %6s\n", width,
                "reference (1 device)", ms(t_ref).c_str(), ms(t_ref).c_str(), ms(0).c_str(),
                ms(ref_run.predicted).c_str(), "0 B", "0 B",
                human_bytes(ref_run.inputs + ref_run.peak).c_str(), "-", "-", "0.00", "0.0", "0.0");
  os << line;
  for (const measured& s : all) {
    const double t = median(s.reps), comm = median(s.comm_reps);
    std::string held = "-";
    double worst = 0;
    for (std::size_t r = 0; r < s.peak.size(); ++r)
      worst = std::max(worst, s.inputs[r] + s.peak[r]);
    held = human_bytes(static_cast<std::int64_t>(worst));
    double worst_bound = 0;
    for (std::size_t r = 0; r < s.bound.size(); ++r)
      worst_bound = std::max(worst_bound, s.inputs[r] + s.bound[r]);
    const std::string bound =
        s.peak_claimed ? human_bytes(static_cast<std::int64_t>(worst_bound)) : "not claimed";
    const std::string bubble = is_pipeline(*s.k) ? fmt("%.2f", s.pred.bubble) : "-";
    const std::string err = s.c.prob.layers() > 1 ? "-" : ratio(s.err.err_u_mag);
    const std::string share = s.err.finite ? ratio(100 * s.err.bound_share) : "NaN";
    const std::string stat_share = s.err.finite ? ratio(100 * s.err.stat_share) : "NaN";
    std::snprintf(
        line, sizeof line, "%-*s %11s %11s %11s %11s  %10s %10s  %10s %10s  %6s  %9s %6s %6s\n",
        width, s.name.c_str(), ms(t).c_str(), ms(std::max(t - comm, 0.0)).c_str(), ms(comm).c_str(),
        ms(s.pred.time).c_str(), human_bytes(static_cast<std::int64_t>(max_of(s.sent))).c_str(),
        human_bytes(static_cast<std::int64_t>(max_of(s.received))).c_str(), held.c_str(),
        bound.c_str(), bubble.c_str(), err.c_str(), share.c_str(), stat_share.c_str());
    os << line;
  }
  return os.str();
}

[[nodiscard]] double held_need(const measured& s) {
  double need = 0;
  for (std::size_t r = 0; r < s.peak.size(); ++r)
    need = std::max(need, s.inputs[r] + std::max(s.peak[r], s.bound[r]));
  return need;
}

// With a memory budget per rank: the fastest strategy that fits, and why each other one loses.
std::string choice(const std::vector<measured>& all, std::int64_t budget, json& out) {
  std::ostringstream os;
  const measured* best = nullptr;
  for (const measured& s : all)
    if (held_need(s) <= static_cast<double>(budget) &&
        (best == nullptr || median(s.reps) < median(best->reps)))
      best = &s;
  out["memory_per_rank"] = budget;
  if (best == nullptr) {
    os << "no strategy fits in " << human_bytes(budget) << " per rank\n";
    out["fastest_that_fits"] = nullptr;
    for (const measured& s : all)
      os << "  " << s.name << ": memory, needs "
         << human_bytes(static_cast<std::int64_t>(held_need(s))) << " per rank\n";
    return os.str();
  }
  out["fastest_that_fits"] = best->name;
  const double tb = median(best->reps), cb = median(best->comm_reps);
  os << "fastest within " << human_bytes(budget) << " per rank: " << best->name << " (" << ms(tb)
     << ")\n";
  for (const measured& s : all) {
    if (&s == best) continue;
    std::string why;
    const double need = held_need(s);
    if (need > static_cast<double>(budget)) {
      why = "memory: needs " + human_bytes(static_cast<std::int64_t>(need)) + " per rank";
    } else {
      const double t = median(s.reps), c = median(s.comm_reps);
      // A pipeline's idle stages wait in their receives: that share of the step is its bubble.
      const double idle = s.pred.bubble * t, idle_best = best->pred.bubble * tb;
      const double d_bubble = idle - idle_best;
      const double d_comm = (c - idle) - (cb - idle_best);
      const double d_compute = (t - c) - (tb - cb);
      const double d_sent =
          max_of(s.sent) + max_of(s.received) - max_of(best->sent) - max_of(best->received);
      if (d_bubble >= d_comm && d_bubble >= d_compute)
        why = "bubble: " + fmt("%.0f%%", 100 * s.pred.bubble) + " of its step idle";
      else if (d_comm >= d_compute)
        why = "bytes: " + ms(std::max(d_comm, 0.0)) + " more communication (" +
              (d_sent >= 0 ? "+" : "-") + human_bytes(static_cast<std::int64_t>(std::abs(d_sent))) +
              " per rank)";
      else
        why = "compute: its local GEMMs take " + ms(std::max(d_compute, 0.0)) + " longer";
    }
    os << "  " << s.name << " loses on " << why << "\n";
    out["why_others_lose"][s.name] = why;
  }
  return os.str();
}

[[nodiscard]] std::string machine_text(const char* path, const char* key) {
  std::ifstream f(path);
  std::string l;
  while (std::getline(f, l))
    if (l.rfind(key, 0) == 0) {
      const auto c = l.find(':');
      if (c == std::string::npos) return l;
      std::string v = l.substr(c + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "";
}

}  // namespace

json machine_json(int ranks) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  double load[3] = {0, 0, 0};
  json m = {{"hostname", host},
            {"cpu", machine_text("/proc/cpuinfo", "model name")},
            {"cores_online", sysconf(_SC_NPROCESSORS_ONLN)},
            {"memory", machine_text("/proc/meminfo", "MemTotal")},
            {"ranks", ranks}};
  if (getloadavg(load, 3) == 3) m["load_average"] = json::array({load[0], load[1], load[2]});
  json mca = json::object();
  for (const auto& [k, v] : prop::collective_mca_settings()) mca[k] = v;
  m["open_mpi_coll_settings"] = mca;
  const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
  m["OPENBLAS_NUM_THREADS"] = threads != nullptr ? threads : "";
  return m;
}

namespace {

json strategy_json(const measured& s) {
  const double t = median(s.reps), comm = median(s.comm_reps);
  json j = {{"name", s.name},
            {"case", s.c.to_string()},
            {"mesh", s.k->mesh_dims(s.c)},
            {"time_s", t},
            {"compute_s", std::max(t - comm, 0.0)},
            {"comm_s", comm},
            {"comm_share", t > 0 ? comm / t : 0.0},
            {"reps_s", s.reps},
            {"comm_reps_s", s.comm_reps},
            {"predicted",
             {{"time_s", s.pred.time},
              {"compute_s", s.pred.compute},
              {"comm_s", s.pred.comm},
              {"per_rank_s", s.pred.per_rank},
              {"flops_per_rank", s.pred.flops},
              {"predicted_over_measured", t > 0 ? s.pred.time / t : 0.0}}},
            {"bytes_sent_per_rank", s.sent},
            {"bytes_received_per_rank", s.received},
            {"ledger_matches_claim", s.ledger_matches},
            {"memory",
             {{"inputs_bytes_per_rank", s.inputs},
              {"peak_bytes_per_rank", s.peak},
              {"bound_bytes_per_rank", s.peak_claimed ? json(s.bound) : json("not claimed")}}},
            {"error",
             {{"err_u_mag", s.c.prob.layers() > 1 ? json(nullptr) : json(s.err.err_u_mag)},
              {"bound_share", s.err.bound_share},
              {"statistical_share", s.err.stat_share},
              {"finite", s.err.finite}}}};
  if (is_pipeline(*s.k))
    j["bubble"] = {{"theory", s.pred.bubble},
                   {"micro_batches", s.c.param("m")},
                   {"stages", s.k->mesh_dims(s.c)[1]}};
  else
    j["bubble"] = nullptr;
  return j;
}

// gnuplot, when it is there: each figure as PNG and SVG. Returns the files written.
std::vector<std::string> plot(const std::filesystem::path& dir, const std::vector<measured>& all,
                              const reference_run& ref_run) {
  namespace fs = std::filesystem;
  if (!cli_tools::gnuplot_available()) return {};
  {
    std::ofstream t(dir / "time.dat"), m(dir / "memory.dat"), b(dir / "bytes.dat");
    t << "# strategy compute_ms comm_ms predicted_ms\n";
    m << "# strategy held_MiB bound_MiB\n";
    b << "# strategy sent_MiB received_MiB\n";
    const double r = median(ref_run.reps);
    t << "reference " << r * 1e3 << " 0 " << ref_run.predicted * 1e3 << "\n";
    for (const measured& s : all) {
      const double tt = median(s.reps), c = median(s.comm_reps);
      t << s.name << " " << std::max(tt - c, 0.0) * 1e3 << " " << c * 1e3 << " "
        << s.pred.time * 1e3 << "\n";
      double held = 0, bound = 0;
      for (std::size_t q = 0; q < s.peak.size(); ++q) {
        held = std::max(held, s.inputs[q] + s.peak[q]);
        bound = std::max(bound, s.inputs[q] + s.bound[q]);
      }
      m << s.name << " " << held / 1048576 << " " << (s.peak_claimed ? bound / 1048576 : 0.0)
        << "\n";
      b << s.name << " " << max_of(s.sent) / 1048576 << " " << max_of(s.received) / 1048576 << "\n";
    }
  }
  const double single = static_cast<double>(ref_run.inputs + ref_run.peak) / 1048576;
  std::vector<std::string> written;
  for (const char* term : {"png", "svg"}) {
    const std::string ext = term;
    std::ostringstream gp;
    gp << (ext == "png" ? "set terminal pngcairo size 1000,560 noenhanced\n"
                        : "set terminal svg size 1000,560 noenhanced\n");
    gp << "set style data histograms\nset style fill solid 0.8 border -1\nset boxwidth 0.7\n"
          "set xtics rotate by -30\nset grid ytics\nset key above horizontal\nset yrange [0:*]\n";
    gp << "set output 'compare_time." << ext << "'\n"
       << "set title 'one training step: slowest rank, median (predicted: cost model)'\n"
       << "set ylabel 'ms'\nset style histogram rowstacked\n"
       << "plot 'time.dat' using 2:xtic(1) title 'compute', '' using 3 title 'communication', "
          "'' using 0:4 with points pt 7 ps 1.5 lc rgb 'black' title 'predicted'\n";
    gp << "set output 'compare_memory." << ext << "'\n"
       << "set title 'memory per rank: inputs + measured peak (largest rank)'\n"
       << "set ylabel 'MiB'\nset style histogram clustered gap 1\n"
       << "plot 'memory.dat' using 2:xtic(1) title 'measured', '' using 3 title 'cost-model "
          "bound', "
       << single << " with lines lw 2 title 'single device'\n";
    gp << "set output 'compare_bytes." << ext << "'\n"
       << "set title 'bytes per rank, one step (ledger, largest rank)'\n"
       << "plot 'bytes.dat' using 2:xtic(1) title 'sent', '' using 3 title 'received'\n";
    if (!cli_tools::run_gnuplot(dir, "plots_" + ext + ".gp", gp.str())) continue;
    for (const char* what : {"time", "memory", "bytes"}) {
      const fs::path f = dir / ("compare_" + std::string(what) + "." + ext);
      if (fs::exists(f)) written.push_back(f.filename().string());
    }
  }
  return written;
}

// --- the run ------------------------------------------------------------------------------------

// The whole problem once per rank: inputs, the step's outputs, the expected outputs with their
// magnitudes or bounds, and a stack's hidden tensors. Checked arithmetic, against the limit.
void check_reference_footprint(const problem& p, std::int64_t limit) {
  const std::vector<std::int64_t> d = p.widths();
  const char* what = "reference bytes";
  // X, Y and every W: the inputs, the reference's outputs, the expected values and their bounds.
  std::int64_t tensors =
      checked_add(checked_mul(p.M, p.K, what), checked_mul(p.M, p.N, what), what);
  for (std::size_t l = 0; l + 1 < d.size(); ++l)
    tensors = checked_add(tensors, checked_mul(d[l], d[l + 1], what), what);
  // A stack's hidden tensors (M × H_l), with their gradients and bounds.
  std::int64_t hidden = 0;
  for (std::size_t l = 1; l + 1 < d.size(); ++l)
    hidden = checked_add(hidden, checked_mul(p.M, d[l], what), what);
  // Bytes per element, from compare's max RSS per rank at 2 ranks, with 8–30% to spare: a single
  // layer 52 (f64), 30.5 (f32), 27 (bf16) per element of X, W, Y; a stack 83 (f64), 62.6 (bf16)
  // per element of those and 64–66 per hidden element (4096×32×32, H = 4096 and 16384).
  const auto es = static_cast<std::int64_t>(size_of(p.type));
  const std::int64_t per_tensor = 4 * es + (p.layers() > 1 ? 64 : 24);
  const std::int64_t bytes =
      checked_add(checked_mul(tensors, per_tensor, what), checked_mul(hidden, 80, what), what);
  if (bytes > limit)
    throw usage_error("compare: the single-device reference of this shape needs " +
                      human_bytes(bytes) + " on every rank, above the memory limit of " +
                      human_bytes(limit) + " per rank (--memory-limit)");
}

// What the step broke, every rank alike: the error bound, the claimed collectives, the claimed
// peak; empty if nothing.
std::string broken(const measured& s) {
  std::string broke;
  const auto add = [&](const std::string& what) { broke += (broke.empty() ? "" : "; ") + what; };
  if (!s.err.finite || s.err.bound_share > 1)
    add("its outputs are outside their error bound (" +
        (s.err.finite ? ratio(s.err.bound_share) + "× the bound" : "non-finite") + ")");
  else if (s.err.stat_share > 1)
    add("its outputs are outside their statistical bound (" + ratio(s.err.stat_share) +
        "× it), which a correct kernel exceeds with probability ≤ " +
        fmt("%.0e", ref::statistical_p_fail));
  if (!s.ledger_matches) add("its collectives differ from its claimed ledger");
  if (s.peak_over_bound) add("its measured peak is above its claimed bound");
  return broke;
}

template <class T>
int run_typed(const std::vector<measured>& chosen_in, const options& o, const problem& prob,
              const precision& policy, par::backend backend, std::int64_t budget) {
  std::vector<measured> chosen = chosen_in;
  par::comm world = par::comm::world();
  const int rank = world.rank(), p = world.size();
  const int total = 2 + static_cast<int>(chosen.size()) * (o.reps + 1) + o.reps;
  progress bar(rank == 0 && !o.quiet, total);
  par::run_case ref_case = chosen.empty() ? par::run_case{} : chosen.front().c;
  ref_case.prob = prob;
  ref_case.strategy = "reference";
  ref_case.p = 1;
  ref_case.mode = value_mode::uniform;
  ref_case.seed = 1;

  const calibration cal = calibrate(o, prob, p, backend);
  bar.step("calibrated");
  // The expected outputs: the whole problem on every rank (a stack's per strategy, later).
  whole<T> w = whole_inputs<T>(ref_case);
  std::optional<expected_outputs> single;
  if (prob.layers() == 1) single = expected_outputs{prop::whole_references(ref_case), {}, {}};
  bar.step("reference computed");
  for (measured& s : chosen) {
    s.pred = predict(*s.k, s.c, cal);
    first_step(s, single ? &*single : nullptr);
    bar.step(s.name + " checked");
  }
  single.reset();
  reference_run ref_run;
  {
    const std::vector<std::int64_t> d = prob.widths();
    ref_run.inputs = static_cast<std::int64_t>(w.x.data.size() + w.dy.data.size()) * sizeof(T);
    for (const auto& wl : w.ws)
      ref_run.inputs += static_cast<std::int64_t>(wl.data.size() * sizeof(T));
    double f = 0;
    for (std::size_t l = 0; l + 1 < d.size(); ++l)
      f += 6.0 * static_cast<double>(prob.M) * static_cast<double>(d[l]) *
           static_cast<double>(d[l + 1]);
    ref_run.flops = f;
    ref_run.predicted = f / cal.gemm_rate;
  }
  // Repetitions, alternating: rep r runs the reference and every strategy, starting at entry r.
  const int entries = static_cast<int>(chosen.size()) + 1;
  for (int r = 0; r < o.reps; ++r)
    for (int i = 0; i < entries; ++i) {
      const int e = (i + r) % entries;
      if (e == 0) {
        barrier();
        double t = 0;
        if (rank == 0) {
          mem::peak_scope scope;
          const double t0 = MPI_Wtime();
          reference_step<T>(ref_case, w);
          t = MPI_Wtime() - t0;
          ref_run.peak =
              std::max<std::int64_t>(ref_run.peak, static_cast<std::int64_t>(scope.peak()));
        }
        max_all(&t, 1);
        ref_run.reps.push_back(t);
        bar.step("reference rep " + std::to_string(r + 1));
        continue;
      }
      measured& s = chosen[static_cast<std::size_t>(e - 1)];
      const step_result sr = run_step(s, nullptr, false);
      // The slowest rank's step, split at the busiest rank's compute (its time outside comm
      // calls): the rest of the step is communication, waiting included.
      double v[2] = {sr.seconds, sr.seconds - sr.comm};
      max_all(v, 2);
      s.reps.push_back(v[0]);
      s.comm_reps.push_back(std::max(v[0] - v[1], 0.0));
      bar.step(s.name + " rep " + std::to_string(r + 1));
    }
  double ref_peak = static_cast<double>(ref_run.peak);
  max_all(&ref_peak, 1);
  ref_run.peak = static_cast<std::int64_t>(ref_peak);
  bar.finish();
  if (rank != 0) {
    for (const measured& s : chosen)
      if (!broken(s).empty()) return 1;
    return 0;
  }

  std::printf(
      "shardcheck compare: %d ranks, M=%lld N=%lld K=%lld%s%s dtype=%s backend=%s, %d reps "
      "(alternating), one step = forward + backward\n",
      p, static_cast<long long>(prob.M), static_cast<long long>(prob.N),
      static_cast<long long>(prob.K),
      prob.hidden.empty() ? "" : " H=", prob.hidden.empty() ? "" : o.hidden.c_str(),
      (std::string(to_string(prob.type)) +
       (is_storage16(prob.type) ? " " + to_string(policy) : std::string()))
          .c_str(),
      std::string(par::to_string(backend)).c_str(), o.reps);
  const auto src = [](bool probed) { return probed ? "probed" : "given"; };
  if (p < 2)  // nothing leaves a single rank: no link to probe or to charge
    std::printf("cost model: one rank, no link, GEMM %.2f GFLOP/s (%s)\n", cal.gemm_rate / 1e9,
                src(cal.gemm_probed));
  else
    std::printf(
        "cost model: alpha %.2f us (%s), beta %.2f GB/s (%s), collectives alpha %.2f us "
        "beta %.2f GB/s, GEMM %.2f GFLOP/s (%s)\n",
        cal.alpha * 1e6, src(cal.alpha_probed), cal.beta / 1e9, src(cal.beta_probed),
        cal.alpha_coll * 1e6, cal.beta_coll / 1e9, cal.gemm_rate / 1e9, src(cal.gemm_probed));
  std::fputs(table(chosen, ref_run).c_str(), stdout);
  json out;
  out["command"] = "compare";
  out["machine"] = machine_json(p);
  out["shape"] = {{"M", prob.M},
                  {"N", prob.N},
                  {"K", prob.K},
                  {"hidden", prob.hidden},
                  {"dtype", to_string(prob.type)},
                  {"layout", to_string(prob.layout)}};
  if (is_storage16(prob.type)) {
    out["shape"]["policy"] = {{"acc", to_string(policy.acc)}, {"reduce", to_string(policy.reduce)}};
  }
  out["backend"] = par::to_string(backend);
  out["reps"] = o.reps;
  out["cost_model"] = {{"alpha_s", cal.alpha},
                       {"beta_bytes_per_s", cal.beta},
                       {"collective_alpha_s", cal.alpha_coll},
                       {"collective_beta_bytes_per_s", cal.beta_coll},
                       {"gemm_flops_per_s", cal.gemm_rate},
                       {"alpha_probed", cal.alpha_probed},
                       {"beta_probed", cal.beta_probed},
                       {"gemm_probed", cal.gemm_probed},
                       {"probe", cal.probe}};
  const double t_ref = median(ref_run.reps);
  out["reference"] = {{"time_s", t_ref},
                      {"reps_s", ref_run.reps},
                      {"flops", ref_run.flops},
                      {"predicted_time_s", ref_run.predicted},
                      // The GEMM rate the reps reached, beside the probe's (a busy machine's load
                      // may differ between the two moments).
                      {"achieved_flops_per_s", t_ref > 0 ? ref_run.flops / t_ref : 0.0},
                      {"inputs_bytes", ref_run.inputs},
                      {"peak_bytes", ref_run.peak}};
  for (const measured& s : chosen) {
    json j = strategy_json(s);
    const double t = median(s.reps);
    j["ideal_speedup_ratio"] = t > 0 ? t_ref / t / p : 0.0;
    out["strategies"].push_back(j);
  }
  if (chosen.empty()) out["strategies"] = json::array();
  if (budget > 0) {
    json c;
    std::fputs(choice(chosen, budget, c).c_str(), stdout);
    out["choice"] = c;
  }
  if (!o.out.empty()) {
    const std::filesystem::path dir(o.out);
    out["plots"] = plot(dir, chosen, ref_run);
    if (out["plots"].empty())
      std::printf(
          "plots not written: gnuplot was not found or failed (apt-get install gnuplot-nox)\n");
    out["complete"] = true;
    runner::write_file((dir / "compare.json").string(), out.dump(2) + "\n");
    runner::results_final();
    std::printf("wrote %s and %zu plots\n", (dir / "compare.json").string().c_str(),
                out["plots"].size());
  }
  int status = 0;
  for (const measured& s : chosen) {
    const std::string broke = broken(s);
    if (broke.empty()) continue;
    std::printf("FAIL %s: %s (shardcheck verify --strategy %s finds the case)\n", s.name.c_str(),
                broke.c_str(), s.name.c_str());
    status = 1;
  }
  std::fflush(stdout);
  return status;
}

}  // namespace

CLI::App* add_subcommand(CLI::App& app, options& o) {
  auto* c = app.add_subcommand(
      "compare",
      "Time every strategy that fits a shape side by side with the single-device reference "
      "(under mpirun): time split, bytes, memory, error, and the cost model's prediction");
  c->add_option("--M", o.m, "Rows of X (batch)")->required();
  c->add_option("--N", o.n, "Output features")->required();
  c->add_option("--K", o.k, "Input features")->required();
  c->add_option("--H", o.hidden, "Hidden widths of a stack, e.g. 2048 or 512,256");
  c->add_option("--act", o.act, "Activation of a stack: identity or relu")->capture_default_str();
  c->add_option("--dtype", o.dtype, "f32, f64, or bf16 / f16 storage with f32 sums")
      ->capture_default_str();
  c->add_option("--reduce", o.reduce,
                "bf16 / f16: the dtype partial sums are reduced in, f32 or the storage dtype "
                "(strategies without that policy are skipped)")
      ->capture_default_str();
  c->add_option("--backend", o.backend, "mpi or native")->capture_default_str();
  c->add_option("--strategy", o.strategies,
                "Strategy to compare (repeatable; default: all that fit)");
  c->add_option("--memory-per-rank", o.memory_per_rank,
                "Name the fastest strategy that fits in this much per rank, e.g. 512MiB");
  runner::add_memory_limit(c, o.memory_limit);
  c->add_option("--reps", o.reps, "Timed repetitions per strategy (median)")->capture_default_str();
  c->add_option("--out", o.out, "Directory for compare.json and the plots (created)");
  c->add_option("--alpha", o.alpha, "Link latency in seconds (default: probed)")
      ->check(runner::positive_number());
  c->add_option("--beta", o.beta, "Link bandwidth in bytes/s (default: probed)")
      ->check(runner::positive_number());
  c->add_option("--gemm-rate", o.gemm_rate, "Local GEMM rate in flop/s (default: probed)")
      ->check(runner::positive_number());
  c->add_flag("--quiet", o.quiet, "No progress bar");
  return c;
}

int run(const std::vector<const par::kernel*>& kernels, const finder& find, const options& o) {
  if (o.reps < 1 || o.reps > 1000) throw usage_error("--reps must be between 1 and 1000");
  if (o.m < 1 || o.n < 1 || o.k < 1)
    throw usage_error("--M, --N and --K must be at least 1 (got " + std::to_string(o.m) + ", " +
                      std::to_string(o.n) + ", " + std::to_string(o.k) + ")");
  problem prob;
  prob.M = o.m;
  prob.N = o.n;
  prob.K = o.k;
  prob.type = parse_dtype(o.dtype);
  precision policy;
  policy.reduce = parse_dtype(o.reduce);
  if (is_storage16(prob.type))
    validate_policy(prob.type, policy);
  else if (policy.reduce != dtype::f32)
    throw usage_error("--reduce is for --dtype bf16 or f16");
  const par::backend backend = par::parse_backend(o.backend);
  // --act is checked with or without --H: a misspelt activation is never accepted silently.
  const activation act = parse_activation(o.act);
  if (!o.hidden.empty()) {
    prob.hidden = par::partition::parse(o.hidden).sizes();
    for (std::int64_t h : prob.hidden)
      if (h < 1) throw usage_error("--H: every hidden width must be at least 1");
    prob.act = act;
  }
  prob.validate();
  par::comm world = par::comm::world();
  const int p = world.size();
  const std::int64_t limit = runner::memory_limit(o.memory_limit);
  const std::int64_t budget =
      o.memory_per_rank.empty() ? 0 : prop::parse_bytes(o.memory_per_rank, "--memory-per-rank");
  check_reference_footprint(prob, limit);
  std::map<std::string, const par::kernel*> by_name;
  std::string known;
  for (const par::kernel* k : kernels) {
    by_name[k->name()] = k;
    known += (known.empty() ? "" : ", ") + k->name();
  }
  std::vector<std::string> names = o.strategies;
  const bool named = !names.empty();
  if (!named)
    for (const par::kernel* k : kernels)
      if (by_name.count(k->name()) != 0) names.push_back(k->name());
  std::vector<measured> chosen;
  std::vector<std::string> skipped;
  std::set<std::string> seen;
  for (const std::string& n : names) {
    const prop::subject* subject = find(n);
    if (subject == nullptr || (by_name.count(n) == 0 && n.rfind("mutant.", 0) != 0))
      throw usage_error("unknown strategy '" + n + "' (known: " + known + ")");
    if (!seen.insert(n).second) continue;
    measured s;
    s.name = n;
    s.k = subject->k;
    s.wrap = subject->wrap;
    s.c.strategy = n;
    s.c.p = p;
    s.c.prob = prob;
    s.c.mode = value_mode::uniform;
    s.c.seed = 1;
    s.c.backend = backend;
    s.c.policy = policy;
    try {
      const par::kernel_info& info = s.k->info();
      if (prob.layers() < info.min_layers || prob.layers() > info.max_layers)
        throw invalid_problem("takes " + std::to_string(info.min_layers) + "-" +
                              std::to_string(info.max_layers) + " layers, the shape has " +
                              std::to_string(prob.layers()) + " (--H)");
      par::complete_and_validate(*s.k, s.c);
      // A stage holding no layer is an idle rank: such a pipeline is not one that fits.
      if (const auto dims = s.k->mesh_dims(s.c); is_pipeline(*s.k) && dims.size() == 3 &&
                                                 prob.layers() < static_cast<std::size_t>(dims[1]))
        throw invalid_problem("its " + std::to_string(dims[1]) + " stages need at least " +
                              std::to_string(dims[1]) + " layers (--H), the shape has " +
                              std::to_string(prob.layers()));
      const par::claims cl = s.k->cost(s.c, par::coords_of(0, s.k->mesh_dims(s.c)));
      if (!cl.chains)
        throw invalid_problem("it claims no chains of additions: no error bound to judge by");
      if (cl.chains->size() != prob.layers())
        throw invalid_problem("its cost() claims " + std::to_string(cl.chains->size()) +
                              " chain_lengths for L = " + std::to_string(prob.layers()) +
                              " layers: one per layer");
    } catch (const invalid_problem& e) {
      if (named) throw usage_error(n + " does not fit: " + e.what());
      skipped.push_back(n + ": " + e.what());
      continue;
    }
    prop::check_footprint(*s.k, s.c, limit);
    chosen.push_back(std::move(s));
  }
  if (!o.out.empty()) {
    runner::prepare_out_dir("--out", o.out);
    if (world.rank() == 0)
      runner::partial_file((std::filesystem::path(o.out) / "compare.json").string());
  }
  if (world.rank() == 0)
    for (const std::string& why : skipped) std::printf("skipped %s\n", why.c_str());
  if (chosen.empty())
    throw usage_error("no strategy takes this shape on " + std::to_string(p) +
                      " ranks (each one's reason is above): nothing to compare");
  switch (prob.type) {
    case dtype::f32: return run_typed<float>(chosen, o, prob, policy, backend, budget);
    case dtype::bf16: return run_typed<bfloat16_t>(chosen, o, prob, policy, backend, budget);
    case dtype::f16: return run_typed<half_t>(chosen, o, prob, policy, backend, budget);
    case dtype::f64: break;
  }
  return run_typed<double>(chosen, o, prob, policy, backend, budget);
}

}  // namespace shardcheck::compare
