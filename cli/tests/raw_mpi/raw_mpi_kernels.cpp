// Kernels that call MPI themselves, checked through shardcheck::pmpi (pmpi.hpp): data parallel
// (X split by rows, W replicated; Y all-gathered, dW all-reduced), written with plain MPI calls on
// the communicators the mesh hands out and on ones derived from them. Three are correct and must
// pass every property; three carry one defect each, and the ctest entries prove it fails:
//   raw_data_parallel     MPI_Allgatherv and MPI_Allreduce on ctx.grid.axis(0)
//   raw_derived_comms     MPI_Iallgatherv on an MPI_Comm_dup of the axis, MPI_Iallreduce on an
//                         MPI_Comm_split of it (both record as axis 0)
//   raw_gather_bcast      MPI_Send / MPI_Recv of the rows to rank 0, MPI_Bcast of Y; dW
//                         all-reduced on ctx.grid.all() (axis −1)
//   raw_extra_allreduce   raw_data_parallel plus one MPI_Allreduce it does not claim: ledger
//   raw_rank0_skips       rank 0 skips MPI_Allgatherv: runs, "collective mismatch"
//   raw_derived_extra     raw_derived_comms plus one MPI_Allreduce on the split comm: ledger
// and one-sided ones (raw_one_sided below):
//   raw_one_sided         Y's rows MPI_Put into every rank's window between two fences; dW put
//                         into rank 0's window, summed there in rank order, MPI_Get back
//   raw_one_sided_short   claims one put fewer than it makes: ledger
//   raw_one_sided_skips_fence  rank 0 skips Y's closing fence and frees the window: runs,
//                         "collective mismatch" (not a hang)
#include <mpi.h>

#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/gemm.hpp>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace rawmpi {
namespace sc = shardcheck::par;

enum class variant {
  data_parallel,
  derived_comms,
  gather_bcast,
  extra_allreduce,
  rank0_skips,
  derived_extra
};

template <class T>
MPI_Datatype type_of() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

class raw_kernel final : public sc::kernel {
 public:
  raw_kernel(std::string name, variant v) : v_(v) {
    info_.name = std::move(name);
    info_.summary = "data parallel with raw MPI calls";
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool replicated = t.t == sc::tensor::w || t.t == sc::tensor::dw || t.t == sc::tensor::y;
    return {replicated ? sc::placement::R() : sc::placement::S(0)};
  }

  // Raw calls record with the `mpi` formulas whatever the case's backend.
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    const sc::partition& rows = c.part("M");
    const std::size_t es = shardcheck::size_of(c.prob.type);
    const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, s = static_cast<std::int64_t>(es);
    const int me = coords[0];
    sc::claims out;
    sc::claims::collective_claim log;
    if (v_ == variant::gather_bcast) {
      if (me == 0)
        for (int r = 1; r < c.p; ++r)
          log.forward.push_back(sc::recv_entry(rows.size(r) * n, r, es));
      else
        log.forward.push_back(sc::send_entry(rows.size(me) * n, 0, es));
      log.forward.push_back(sc::broadcast_entry(sc::backend::mpi, m * n, 0, me, c.p, es));
      log.backward.push_back(sc::all_reduce_entry(sc::backend::mpi, n * k, me, c.p, es));
      log.backward.back().axis = -1;  // on ctx.grid.all()
    } else {
      log.forward.push_back(sc::all_gather_entry(sc::backend::mpi, rows.scaled(n), me, es));
      log.backward.push_back(sc::all_reduce_entry(sc::backend::mpi, n * k, me, c.p, es));
    }
    out.collectives = log;
    // Y, and the counts and displacements of the all-gather (two ints per rank).
    const std::int64_t gather_ints =
        v_ == variant::gather_bcast ? 0 : 2 * c.p * static_cast<std::int64_t>(sizeof(int));
    out.peak = sc::claims::peak_claim{m * n * s + gather_ints, (rows.size(me) * k + n * k) * s};
    const auto depth =
        sc::reduction_depth(sc::backend::mpi, sc::collective::all_reduce, c.p, n * k);
    out.chains = std::vector<sc::chain_lengths>{{k, n, rows.max_size() + depth}};
    return out;
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      MPI_Comm axis = ctx.grid.axis(0).native_handle();
      int p = 0, me = 0;
      MPI_Comm_size(axis, &p);
      MPI_Comm_rank(axis, &me);
      const sc::partition& rows = c.part("M");
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      T* mine = y.row(static_cast<std::size_t>(rows.offset(me)));
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(), mine);
      if (v_ == variant::gather_bcast) {
        const int own = static_cast<int>(rows.size(me) * c.prob.N);
        if (me != 0) MPI_Send(mine, own, type_of<T>(), 0, 1, axis);
        for (int r = 1; me == 0 && r < p; ++r)
          MPI_Recv(y.row(static_cast<std::size_t>(rows.offset(r))),
                   static_cast<int>(rows.size(r) * c.prob.N), type_of<T>(), r, 1, axis,
                   MPI_STATUS_IGNORE);
        MPI_Bcast(y.data.data(), static_cast<int>(y.data.size()), type_of<T>(), 0, axis);
        return;
      }
      std::vector<int> counts(static_cast<std::size_t>(p)), displs(counts.size());
      for (int r = 0; r < p; ++r) {
        counts[static_cast<std::size_t>(r)] = static_cast<int>(rows.size(r) * c.prob.N);
        displs[static_cast<std::size_t>(r)] = static_cast<int>(rows.offset(r) * c.prob.N);
      }
      if (v_ == variant::derived_comms || v_ == variant::derived_extra) {
        MPI_Comm dup = MPI_COMM_NULL;
        MPI_Comm_dup(axis, &dup);
        MPI_Request r = MPI_REQUEST_NULL;
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, y.data.data(), counts.data(),
                        displs.data(), type_of<T>(), dup, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Comm_free(&dup);
        return;
      }
      if (v_ == variant::rank0_skips && me == 0) return;
      MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, y.data.data(), counts.data(),
                     displs.data(), type_of<T>(), axis);
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dw) {
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(x.rows, k);
      shardcheck::ref::linear_backward_dx<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             w[0].data.data(), dx.data.data());
      dw[0] = sc::matrix<T>(w[0].rows, w[0].cols);
      shardcheck::ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             x.data.data(), dw[0].data.data());
      const int count = static_cast<int>(dw[0].data.size());
      MPI_Comm axis = ctx.grid.axis(0).native_handle();
      if (v_ == variant::gather_bcast) {
        MPI_Allreduce(MPI_IN_PLACE, dw[0].data.data(), count, type_of<T>(), MPI_SUM,
                      ctx.grid.all().native_handle());
        return;
      }
      if (v_ == variant::derived_comms || v_ == variant::derived_extra) {
        int me = 0;
        MPI_Comm_rank(axis, &me);
        MPI_Comm sub = MPI_COMM_NULL;
        MPI_Comm_split(axis, 0, me, &sub);
        MPI_Request r = MPI_REQUEST_NULL;
        MPI_Iallreduce(MPI_IN_PLACE, dw[0].data.data(), count, type_of<T>(), MPI_SUM, sub, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        double extra = 0;
        if (v_ == variant::derived_extra)
          MPI_Allreduce(MPI_IN_PLACE, &extra, 1, MPI_DOUBLE, MPI_SUM, sub);
        MPI_Comm_free(&sub);
        return;
      }
      MPI_Allreduce(MPI_IN_PLACE, dw[0].data.data(), count, type_of<T>(), MPI_SUM, axis);
      double extra = 0;
      if (v_ == variant::extra_allreduce)
        MPI_Allreduce(MPI_IN_PLACE, &extra, 1, MPI_DOUBLE, MPI_SUM, axis);
    });
  }

 private:
  variant v_;
  sc::kernel_info info_;
};
// Data parallel over one-sided MPI on ctx.grid.axis(0) (windows of MPI_Win_allocate, which Open
// MPI supports on one rank too). p = 2, M = 3 (rows 2, 1), N = 2: forward puts rank 0's 4
// elements to ranks 0 and 1 and rank 1's 2 to both; backward puts each dW (N·K) into rank 0's
// window of 2·N·K, rank 0 sums slot 0 + slot 1 into slot 0, and rank 1 gets it.
class raw_one_sided final : public sc::kernel {
 public:
  enum class defect { none, short_claim, skips_fence };
  raw_one_sided(std::string name, defect d) : d_(d) {
    info_.name = std::move(name);
    info_.summary = "data parallel with one-sided MPI (put, get, fence)";
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool replicated = t.t == sc::tensor::w || t.t == sc::tensor::dw || t.t == sc::tensor::y;
    return {replicated ? sc::placement::R() : sc::placement::S(0)};
  }

  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    const sc::partition& rows = c.part("M");
    const std::size_t es = shardcheck::size_of(c.prob.type);
    const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, s = static_cast<std::int64_t>(es);
    const int me = coords[0];
    const auto sync = [](sc::collective kind) { return sc::win_sync_entry(kind); };
    sc::claims::collective_claim log;
    log.forward.push_back(sc::win_create_entry(m * n * s));
    log.forward.push_back(sync(sc::collective::win_fence));
    const int claimed = d_ == defect::short_claim ? c.p - 1 : c.p;
    for (int q = 0; q < claimed; ++q)
      log.forward.push_back(sc::put_entry(rows.size(me) * n, q, es));
    log.forward.push_back(sync(sc::collective::win_fence));
    log.forward.push_back(sync(sc::collective::win_free));
    log.backward.push_back(sc::win_create_entry(me == 0 ? c.p * n * k * s : 0));
    log.backward.push_back(sync(sc::collective::win_fence));
    log.backward.push_back(sc::put_entry(n * k, 0, es));
    log.backward.push_back(sync(sc::collective::win_fence));
    log.backward.push_back(sync(sc::collective::win_fence));
    if (me != 0) log.backward.push_back(sc::get_entry(n * k, 0, es));
    log.backward.push_back(sync(sc::collective::win_fence));
    log.backward.push_back(sync(sc::collective::win_free));
    sc::claims out;
    out.collectives = log;
    // The windows are MPI's memory: Y, then dX and dW.
    out.peak = sc::claims::peak_claim{m * n * s, (rows.size(me) * k + n * k) * s};
    out.chains = std::vector<sc::chain_lengths>{{k, n, rows.max_size() + c.p - 1}};
    return out;
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      MPI_Comm axis = ctx.grid.axis(0).native_handle();
      int p = 0, me = 0;
      MPI_Comm_size(axis, &p);
      MPI_Comm_rank(axis, &me);
      const sc::partition& rows = c.part("M");
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      T* mine = y.row(static_cast<std::size_t>(rows.offset(me)));
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(), mine);
      T* base = nullptr;
      MPI_Win win = MPI_WIN_NULL;
      MPI_Win_allocate(static_cast<MPI_Aint>(y.data.size() * sizeof(T)), sizeof(T), MPI_INFO_NULL,
                       axis, &base, &win);
      MPI_Win_fence(0, win);
      const int own = static_cast<int>(rows.size(me) * c.prob.N);
      for (int q = 0; q < p; ++q)
        MPI_Put(mine, own, type_of<T>(), q, rows.offset(me) * c.prob.N, own, type_of<T>(), win);
      if (d_ != defect::skips_fence || me != 0) MPI_Win_fence(0, win);
      std::copy(base, base + y.data.size(), y.data.begin());
      MPI_Win_free(&win);
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dw) {
      MPI_Comm axis = ctx.grid.axis(0).native_handle();
      int p = 0, me = 0;
      MPI_Comm_size(axis, &p);
      MPI_Comm_rank(axis, &me);
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(x.rows, k);
      shardcheck::ref::linear_backward_dx<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             w[0].data.data(), dx.data.data());
      dw[0] = sc::matrix<T>(w[0].rows, w[0].cols);
      shardcheck::ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             x.data.data(), dw[0].data.data());
      const std::size_t nk = dw[0].data.size();
      const int count = static_cast<int>(nk);
      T* slots = nullptr;
      MPI_Win win = MPI_WIN_NULL;
      const std::size_t mine = me == 0 ? static_cast<std::size_t>(p) * nk : 0;
      MPI_Win_allocate(static_cast<MPI_Aint>(mine * sizeof(T)), sizeof(T), MPI_INFO_NULL, axis,
                       &slots, &win);
      MPI_Win_fence(0, win);
      MPI_Put(dw[0].data.data(), count, type_of<T>(), 0, static_cast<MPI_Aint>(me) * count, count,
              type_of<T>(), win);
      MPI_Win_fence(0, win);
      if (me == 0) {  // slot 0 + slot 1 + … in rank order, into slot 0 and dW
        for (int q = 1; q < p; ++q)
          for (std::size_t i = 0; i < nk; ++i)
            slots[i] += slots[static_cast<std::size_t>(q) * nk + i];
        std::copy(slots, slots + nk, dw[0].data.begin());
      }
      MPI_Win_fence(0, win);
      if (me != 0) MPI_Get(dw[0].data.data(), count, type_of<T>(), 0, 0, count, type_of<T>(), win);
      MPI_Win_fence(0, win);
      MPI_Win_free(&win);
    });
  }

 private:
  defect d_;
  sc::kernel_info info_;
};
}  // namespace rawmpi

int main(int argc, char** argv) {
  using rawmpi::variant;
  shardcheck::par::registry mine;
  for (auto [name, v] : {std::pair{"raw_data_parallel", variant::data_parallel},
                         std::pair{"raw_derived_comms", variant::derived_comms},
                         std::pair{"raw_gather_bcast", variant::gather_bcast},
                         std::pair{"raw_extra_allreduce", variant::extra_allreduce},
                         std::pair{"raw_rank0_skips", variant::rank0_skips},
                         std::pair{"raw_derived_extra", variant::derived_extra}})
    mine.add(std::make_unique<rawmpi::raw_kernel>(name, v));
  using one_sided = rawmpi::raw_one_sided;
  for (auto [name, d] : {std::pair{"raw_one_sided", one_sided::defect::none},
                         std::pair{"raw_one_sided_short", one_sided::defect::short_claim},
                         std::pair{"raw_one_sided_skips_fence", one_sided::defect::skips_fence}})
    mine.add(std::make_unique<one_sided>(name, d));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
