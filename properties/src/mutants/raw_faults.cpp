#include "mutants/raw_faults.hpp"

#include <cstring>
#include <numeric>
#include <optional>

namespace shardcheck::prop::mutants {

namespace {
using par::call;
using par::collective;
using par::traffic;
using par::pmpi::raw_collective;
using par::pmpi::run_ref;
using stage = par::pmpi::interceptor::stage;
}  // namespace

// The layer under a fault on one communicator: the kernel's own call (the one being handed over)
// runs as the kernel made it; any other call the fault issues runs through the wrappers (above)
// or straight to PMPI (below).
class raw_inner final : public par::collectives {
 public:
  explicit raw_inner(MPI_Comm comm) : comm_(comm) {
    PMPI_Comm_rank(comm, &rank_);
    PMPI_Comm_size(comm, &size_);
    ints_.reserve(2 * static_cast<std::size_t>(size_));
  }
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] MPI_Comm native_handle() const override { return comm_; }

  // The call being handed over and how to run it; nullptr between hand-overs.
  void hand_over(bool above, const call* asked, run_ref* run, int* rc) {
    above_ = above;
    asked_ = asked;
    run_ = run;
    rc_ = rc;
  }

  traffic run(const call& c) override {
    if (asked_ != nullptr && same(c, *asked_)) {
      *rc_ = (*run_)();
      par::check_mpi(*rc_, "the kernel's collective");
      return {};
    }
    issue(c);
    return {};
  }
  void start(const call&) override { unsupported(); }
  bool test() override { return true; }
  traffic wait() override { return {}; }
  [[nodiscard]] MPI_Request send(const par::message&) override { unsupported(); }
  void wait_send(MPI_Request&) override { unsupported(); }
  std::int64_t recv(const par::message&) override { unsupported(); }

 private:
  [[noreturn]] static void unsupported() {
    throw error("a raw-MPI fault layer runs blocking collectives only");
  }
  static bool same(const call& a, const call& b) {
    return a.kind == b.kind && a.type == b.type && a.in == b.in && a.out == b.out &&
           a.count == b.count && a.root == b.root && a.counts.data() == b.counts.data() &&
           a.counts.size() == b.counts.size();
  }
  // Parts of c.counts as MPI's ints, end to end.
  std::pair<const int*, const int*> parts(const call& c) {
    const std::size_t p = c.counts.size();
    ints_.resize(2 * p);
    int at = 0;
    for (std::size_t i = 0; i < p; ++i) {
      ints_[i] = static_cast<int>(c.counts[i]);
      ints_[p + i] = at;
      at += ints_[i];
    }
    return {ints_.data(), ints_.data() + p};
  }
  void issue(const call& c) {
    const MPI_Datatype t = par::mpi_type(c.type);
    const int n = static_cast<int>(c.count);
    int rc = MPI_SUCCESS;
    switch (c.kind) {
      case collective::barrier: rc = above_ ? MPI_Barrier(comm_) : PMPI_Barrier(comm_); break;
      case collective::all_gather: {
        const auto [counts, displs] = parts(c);
        rc = above_ ? MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.out, counts, displs, t,
                                     comm_)
                    : PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.out, counts, displs, t,
                                      comm_);
        break;
      }
      case collective::all_reduce:
        rc = above_ ? MPI_Allreduce(MPI_IN_PLACE, c.out, n, t, MPI_SUM, comm_)
                    : PMPI_Allreduce(MPI_IN_PLACE, c.out, n, t, MPI_SUM, comm_);
        break;
      case collective::reduce_scatter: {
        const int* counts = parts(c).first;
        rc = above_ ? MPI_Reduce_scatter(c.in, c.out, counts, t, MPI_SUM, comm_)
                    : PMPI_Reduce_scatter(c.in, c.out, counts, t, MPI_SUM, comm_);
        break;
      }
      case collective::broadcast:
        rc =
            above_ ? MPI_Bcast(c.out, n, t, c.root, comm_) : PMPI_Bcast(c.out, n, t, c.root, comm_);
        break;
      default: throw error("a raw-MPI fault layer issued a " + std::string(par::to_string(c.kind)));
    }
    par::check_mpi(rc, "a fault's collective");
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  bool above_ = false;
  const call* asked_ = nullptr;
  run_ref* run_ = nullptr;
  int* rc_ = nullptr;
  untracked_vector<int> ints_;
};

namespace {
// c as a par::call the layers take (its counts copied into `counts`), or nothing when no layer
// can act on it.
std::optional<call> offered(const raw_collective& c, untracked_vector<std::int64_t>& counts) {
  if (c.request != nullptr) return std::nullopt;
  call pc;
  pc.kind = c.kind;
  if (c.kind == collective::barrier) return pc;
  if (c.type == MPI_FLOAT)
    pc.type = dtype::f32;
  else if (c.type == MPI_DOUBLE)
    pc.type = dtype::f64;
  else
    return std::nullopt;
  pc.out = c.out;
  pc.count = c.count;
  const std::size_t es = size_of(pc.type);
  const bool sum = c.op == MPI_SUM;
  switch (c.kind) {
    case collective::all_gather: {
      std::int64_t at = 0;
      for (std::size_t i = 0; i < c.counts.size(); ++i) {
        if (c.displs[i] != at) return std::nullopt;  // not end to end
        at += c.counts[i];
      }
      counts.assign(c.counts.begin(), c.counts.end());
      pc.counts = counts;
      return pc;
    }
    case collective::all_reduce:
      if (!sum) return std::nullopt;
      // The kernel's own partial where the result goes, as in place: the call still reads the
      // send buffer, a fault that skips it leaves the partial.
      if (c.in != nullptr && c.count > 0)
        std::memmove(c.out, c.in, static_cast<std::size_t>(c.count) * es);
      return pc;
    case collective::reduce_scatter:
      if (!sum || c.in == nullptr) return std::nullopt;
      counts.assign(c.counts.begin(), c.counts.end());
      pc.counts = counts;
      pc.in = c.in;
      pc.in_count = std::accumulate(c.counts.begin(), c.counts.end(), std::int64_t{0});
      return pc;
    case collective::broadcast: pc.root = c.root; return pc;
    default: return std::nullopt;
  }
}
}  // namespace

raw_faults::raw_faults(par::layer_position where, layer_maker make, std::shared_ptr<fire_log> log,
                       std::span<const MPI_Comm> comms)
    : where_(where), make_(std::move(make)), log_(std::move(log)) {
  layers_.reserve(64);
  for (const MPI_Comm c : comms) (void)layer_for(c);
}

raw_faults::~raw_faults() = default;

raw_faults::per_comm& raw_faults::layer_for(MPI_Comm comm) {
  for (per_comm& l : layers_)
    if (l.comm == comm) return l;
  auto inner = std::make_unique<raw_inner>(comm);
  raw_inner* raw = inner.get();
  layers_.push_back({comm, raw, make_(std::move(inner), log_)});
  return layers_.back();
}

int raw_faults::intercept(stage s, const raw_collective& c, run_ref run) {
  const bool ours = (s == stage::above) == (where_ == par::layer_position::above);
  if (busy_ || !ours) return run();
  const std::optional<call> asked = offered(c, counts_);
  if (!asked) return run();
  per_comm& l = layer_for(c.comm);
  struct done {
    bool& busy;
    raw_inner& inner;
    ~done() {
      busy = false;
      inner.hand_over(false, nullptr, nullptr, nullptr);
    }
  } reset{busy_, *l.inner};
  busy_ = true;
  int rc = MPI_SUCCESS;
  l.inner->hand_over(s == stage::above, &*asked, &run, &rc);
  (void)l.layer->run(*asked);
  return rc;
}

}  // namespace shardcheck::prop::mutants
