#include "values.hpp"

#include <mpi.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <variant>

#include "shardcheck/parallel/plan.hpp"

namespace shardcheck::values {

namespace {

using par::tensor;
using par::tensor_slot;

// The runs of a block and its values, as doubles (indices are below 2⁵³), so one Gatherv moves
// them: [row runs, (offset, length)…, col runs, (offset, length)…, rows·cols values].
void pack(const par::block& b, const par::any_matrix& m, std::vector<double>& out) {
  for (const auto& runs : {par::runs_of_rows(b), par::runs_of_cols(b)}) {
    out.push_back(static_cast<double>(runs.size()));
    for (const par::index_run& r : runs) {
      out.push_back(static_cast<double>(r.offset));
      out.push_back(static_cast<double>(r.length));
    }
  }
  std::visit(
      [&](const auto& v) {
        for (const auto& e : v.data) out.push_back(static_cast<double>(e));
      },
      m);
}

std::vector<par::index_run> unpack_runs(const double*& at) {
  std::vector<par::index_run> runs(static_cast<std::size_t>(*at++));
  for (par::index_run& r : runs) {
    r.offset = static_cast<std::int64_t>(*at++);
    r.length = static_cast<std::int64_t>(*at++);
  }
  return runs;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

gathered run_and_gather(const prop::subject& s, const par::run_case& c, par::comm& case_comm) {
  const MPI_Comm cc = case_comm.native_handle();
  gathered g;
  std::vector<double> mine;
  std::string failure;
  const std::vector<tensor_slot> outputs = par::outputs_of(c);
  std::vector<par::chain_lengths> chains(c.prob.layers());
  int claimed = 1;
  try {
    par::mesh grid(case_comm, s.k->mesh_dims(c), par::stack_options{c.backend, s.wrap});
    const par::case_plan plan = par::plan_of(*s.k, c, grid.coords());
    const par::claims cl = s.k->cost(c, plan.coords);
    if (cl.chains && cl.chains->size() == chains.size())
      chains = *cl.chains;
    else
      claimed = 0;
    const prop::rank_inputs in = prop::inputs_of(plan, c);
    par::any_matrix y, dx;
    std::vector<par::any_matrix> dws(in.ws.size());
    par::context ctx{grid};
    s.k->forward(ctx, c, par::forward_io{in.x, in.ws, y});
    s.k->backward(ctx, c, par::backward_io{in.x, in.ws, in.dy, dx, dws});
    for (const tensor_slot& t : plan.outputs) {
      const par::block& b = plan[t].region;
      const par::any_matrix& m = t.t == tensor::y ? y : t.t == tensor::dx ? dx : dws.at(t.layer);
      if (static_cast<std::int64_t>(par::rows_of(m)) != b.rows ||
          static_cast<std::int64_t>(par::cols_of(m)) != b.cols)
        throw error(par::name_of(t, c) + " on rank " + std::to_string(case_comm.rank()) + " is " +
                    std::to_string(par::rows_of(m)) + "×" + std::to_string(par::cols_of(m)) +
                    ", its placement says " + std::to_string(b.rows) + "×" +
                    std::to_string(b.cols));
      pack(b, m, mine);
    }
  } catch (const std::exception& e) {
    failure = e.what();
    mine.clear();
  }
  // Every rank learns whether one failed, so that none waits in the gather below.
  int bad = failure.empty() ? 0 : 1, any_bad = 0;
  par::check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, cc), "gather: failure flag");
  if (any_bad != 0) {
    std::string msg = failure.empty() ? "another rank of the case failed" : failure;
    throw error(c.strategy + ": " + msg);
  }
  std::vector<std::int64_t> ch;
  for (const auto& l : chains)
    ch.insert(ch.end(), {l.y, l.dx, l.dw, l.reduced.y, l.reduced.dx, l.reduced.dw});
  par::check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, ch.data(), static_cast<int>(ch.size()), MPI_INT64_T, MPI_MAX, cc),
      "gather: chains");
  par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &claimed, 1, MPI_INT, MPI_MIN, cc), "gather: claims");
  g.chains_claimed = claimed != 0;
  for (std::size_t l = 0; l < chains.size(); ++l)
    g.chains.push_back(
        {ch[6 * l], ch[6 * l + 1], ch[6 * l + 2], {ch[6 * l + 3], ch[6 * l + 4], ch[6 * l + 5]}});
  const int ranks = case_comm.size();
  const auto count = static_cast<long long>(mine.size());
  std::vector<long long> counts(static_cast<std::size_t>(ranks));
  par::check_mpi(MPI_Gather(&count, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, 0, cc),
                 "gather: sizes");
  std::vector<int> sizes(counts.size()), offsets(counts.size());
  std::vector<double> all;
  if (case_comm.rank() == 0) {
    long long total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      if (total + counts[r] > std::numeric_limits<int>::max())
        throw error("gather: the case's outputs are more than 2³¹ values");
      offsets[r] = static_cast<int>(total);
      sizes[r] = static_cast<int>(counts[r]);
      total += counts[r];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  par::check_mpi(MPI_Gatherv(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                             sizes.data(), offsets.data(), MPI_DOUBLE, 0, cc),
                 "gather: values");
  if (case_comm.rank() != 0) return g;
  for (const tensor_slot& t : outputs) {
    gathered_tensor gt;
    gt.slot = t;
    gt.name = par::name_of(t, c);
    const auto [rd, cd] = par::dim_names(t, c.prob);
    gt.rows = par::dim_length(c.prob, rd);
    gt.cols = par::dim_length(c.prob, cd);
    gt.value.assign(static_cast<std::size_t>(checked_mul(gt.rows, gt.cols, gt.name + " elements")),
                    std::numeric_limits<double>::quiet_NaN());
    g.outputs.push_back(std::move(gt));
  }
  std::vector<std::vector<char>> held(g.outputs.size());
  for (std::size_t i = 0; i < g.outputs.size(); ++i) held[i].assign(g.outputs[i].value.size(), 0);
  for (int r = 0; r < ranks; ++r) {
    const double* at = all.data() + offsets[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < g.outputs.size(); ++i) {
      gathered_tensor& gt = g.outputs[i];
      const auto rows = unpack_runs(at), cols = unpack_runs(at);
      std::vector<std::int64_t> gc;
      for (const par::index_run& q : cols)
        for (std::int64_t j = 0; j < q.length; ++j) gc.push_back(q.offset + j);
      for (const par::index_run& q : rows)
        for (std::int64_t ri = 0; ri < q.length; ++ri)
          for (const std::int64_t cj : gc) {
            const double v = *at++;
            const auto idx = static_cast<std::size_t>((q.offset + ri) * gt.cols + cj);
            if (held[i][idx] != 0) {
              if (!same_bits(gt.value[idx], v)) ++gt.conflicts;
              continue;
            }
            held[i][idx] = 1;
            gt.value[idx] = v;
          }
    }
  }
  for (std::size_t i = 0; i < g.outputs.size(); ++i)
    for (const char h : held[i]) g.outputs[i].missing += h == 0 ? 1 : 0;
  return g;
}

}  // namespace shardcheck::values
