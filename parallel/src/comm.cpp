#include "shardcheck/parallel/comm.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <utility>

#include "shardcheck/parallel/flight.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::par {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw mpi_error(std::string(what) + ": " + std::string(msg, static_cast<std::size_t>(len)));
}

environment::environment(int& argc, char**& argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised == 0) {
    int provided = 0;
    // What MPI allocates at its start is MPI's: counted in the kernel's meter, a block MPI frees
    // later inside a case (e.g. a table it outgrows) would lower that case's peak.
    const mem::mpi_heap in_mpi;
    check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owns_ = true;
  }
  // Initialised here or by the program (a library's initialisation, say) before: errors come
  // back as codes either way, which check_mpi turns into exceptions and exit code 4.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

environment::~environment() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (owns_ && finalised == 0) MPI_Finalize();
}

namespace {

// Runs free_it(handle) when MPI finalises: MPI_Finalize deletes MPI_COMM_SELF's attributes first,
// so a datatype or op made once for the whole run is released before MPI checks for leaks
// (MPICH reports each handle still alive at MPI_Finalize).
template <class Handle, int (*Free)(Handle*)>
void free_at_finalize(Handle h) {
  static_assert(sizeof(Handle) <= sizeof(void*));
  void* state = nullptr;
  std::memcpy(&state, &h, sizeof(Handle));
  const auto on_delete = [](MPI_Comm, int keyval, void*, void* extra) {
    Handle handle{};
    std::memcpy(&handle, &extra, sizeof(Handle));
    Free(&handle);
    MPI_Comm_free_keyval(&keyval);
    return MPI_SUCCESS;
  };
  int keyval = MPI_KEYVAL_INVALID;
  check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_delete, &keyval, state),
            "MPI_Comm_create_keyval");
  check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr), "MPI_Comm_set_attr");
}

// Made on first use, which may be inside a kernel's measured scope: what MPI allocates (and
// frees: registering the keyval may move MPI's own tables) is MPI's, never the kernel's.
MPI_Datatype make_2_byte_type() {
  const mem::mpi_heap in_mpi;
  MPI_Datatype t = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &t), "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&t), "MPI_Type_commit");
  free_at_finalize<MPI_Datatype, MPI_Type_free>(t);
  return t;
}

template <class T>
void add_16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = a[i] + b[i];
}

// MPI calls a user-defined op with the call's datatype: bf16's or f16's.
void sum_16(void* in, void* inout, int* len, MPI_Datatype* type) {
  if (*type == mpi_type<bfloat16_t>())
    add_16<bfloat16_t>(in, inout, len, type);
  else
    add_16<half_t>(in, inout, len, type);
}

}  // namespace

template <>
MPI_Datatype mpi_type<bfloat16_t>() {
  static const MPI_Datatype t = make_2_byte_type();
  return t;
}
template <>
MPI_Datatype mpi_type<half_t>() {
  static const MPI_Datatype t = make_2_byte_type();
  return t;
}

MPI_Datatype mpi_type(dtype t) {
  switch (t) {
    case dtype::f32: return MPI_FLOAT;
    case dtype::bf16: return mpi_type<bfloat16_t>();
    case dtype::f16: return mpi_type<half_t>();
    case dtype::f64: break;
  }
  return MPI_DOUBLE;
}

MPI_Op sum_op(dtype t) {
  if (!is_storage16(t)) return MPI_SUM;
  static const MPI_Op op = [] {
    // Declared non-commutative: MPI then combines the contributions in rank order on every rank.
    // As commutative, MPICH adds a + b on one rank and b + a on another, and two NaNs of
    // different sign or payload give each rank different bits (replicas would differ).
    const mem::mpi_heap in_mpi;  // as make_2_byte_type's
    MPI_Op o = MPI_OP_NULL;
    check_mpi(MPI_Op_create(&sum_16, 0, &o), "MPI_Op_create");
    free_at_finalize<MPI_Op, MPI_Op_free>(o);
    return o;
  }();
  return op;
}

// ---- comm_handle ----------------------------------------------------------------------------

void comm_handle::freer::operator()(MPI_Comm c) const {
  if (c == MPI_COMM_NULL || c == MPI_COMM_WORLD || c == MPI_COMM_SELF) return;
  // A call abandoned on it, or on any communicator of an out-of-step case, may never end.
  if (flight::abandoned(c) || flight::keeps_communicators()) return;
  flight::forget(c);
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised == 0) MPI_Comm_free(&c);
}

comm_handle::comm_handle(MPI_Comm c) : c_(c) {
  if (c != MPI_COMM_NULL)
    check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

namespace {
void require_mpi(const char* what) {
  int started = 0, finished = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&finished);
  if (started == 0 || finished != 0)
    throw mpi_error(std::string(what) +
                    ": MPI is not running (construct a shardcheck::par::environment first)");
}
}  // namespace

comm_handle comm_handle::world() {
  require_mpi("comm_handle::world");
  return comm_handle(MPI_COMM_WORLD);
}
comm_handle comm_handle::self() {
  require_mpi("comm_handle::self");
  return comm_handle(MPI_COMM_SELF);
}

int comm_handle::rank() const {
  int r = 0;
  if (valid()) check_mpi(MPI_Comm_rank(c_.get(), &r), "MPI_Comm_rank");
  return r;
}

int comm_handle::size() const {
  int s = 0;
  if (valid()) check_mpi(MPI_Comm_size(c_.get(), &s), "MPI_Comm_size");
  return s;
}

// ---- calls ----------------------------------------------------------------------------------

namespace {
std::int64_t total(std::span<const std::int64_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}

// counts: one per rank, each and every displacement within MPI's int.
void check_counts(std::span<const std::int64_t> counts, int size) {
  if (counts.size() != static_cast<std::size_t>(size))
    throw invalid_problem("collective: " + std::to_string(counts.size()) + " counts for " +
                          std::to_string(size) + " ranks");
  std::int64_t off = 0;
  for (const std::int64_t c : counts) {
    if (c < 0 || c > INT_MAX || off > INT_MAX)
      throw invalid_problem("collective: count out of range for MPI");
    off += c;
  }
}

void check_int(std::int64_t n, collective kind) {
  if (n < 0 || n > INT_MAX)
    throw invalid_problem(std::string(to_string(kind)) + ": count out of range for MPI");
}
}  // namespace

void validate(const call& c, int rank, int size) {
  const std::string_view what = to_string(c.kind);
  switch (c.kind) {
    case collective::all_gather: {
      check_counts(c.counts, size);
      const std::int64_t sum = total(c.counts);
      if (c.count != sum)
        throw invalid_problem(std::string(what) + ": buffer of " + std::to_string(c.count) +
                              " elements for counts totalling " + std::to_string(sum));
      return;
    }
    case collective::reduce_scatter: {
      check_counts(c.counts, size);
      const bool in_ok = c.in_count < 0 || c.in_count == total(c.counts);
      if (!in_ok || c.count != c.counts[static_cast<std::size_t>(rank)])
        throw invalid_problem(std::string(what) + ": buffer sizes disagree with the counts");
      return;
    }
    case collective::all_reduce: check_int(c.count, c.kind); return;
    case collective::broadcast:
      if (c.root < 0 || c.root >= size)
        throw invalid_problem(std::string(what) + ": root out of range");
      check_int(c.count, c.kind);
      return;
    case collective::all_to_all:
      check_counts(c.counts, size);
      check_counts(c.recv_counts, size);
      // Buffers at least as long as the parts they hold.
      if ((c.in_count >= 0 && c.in_count < total(c.counts)) || c.count < total(c.recv_counts))
        throw invalid_problem(std::string(what) + ": buffers shorter than the counts");
      return;
    case collective::barrier: return;
    case collective::reduce:
      throw invalid_problem(std::string(what) + ": reduce is recorded from raw MPI calls only");
    case collective::send:
    case collective::recv:
      throw invalid_problem(std::string(what) + ": a message, not a collective");
    default:
      throw invalid_problem(std::string(what) + ": one-sided, recorded from raw MPI calls only");
  }
}

ledger_entry mpi_entry_of(const call& c, int rank, int size) {
  const std::size_t b = c.elem_bytes();
  ledger_entry e;
  switch (c.kind) {
    case collective::all_gather: e = all_gather_entry(backend::mpi, c.counts, rank, b); break;
    case collective::all_reduce: e = all_reduce_entry(backend::mpi, c.count, rank, size, b); break;
    case collective::reduce_scatter:
      e = reduce_scatter_entry(backend::mpi, c.counts, rank, b);
      break;
    case collective::broadcast:
      e = broadcast_entry(backend::mpi, c.count, c.root, rank, size, b);
      break;
    case collective::all_to_all:
      e = all_to_all_entry(backend::mpi, c.counts, c.recv_counts, rank, b);
      break;
    case collective::reduce: e = reduce_entry(c.count, c.root, rank, size, b); break;
    case collective::barrier: e.kind = collective::barrier; break;  // no elements, no type
    case collective::send: e = send_entry(c.count, c.root, b); break;
    case collective::recv: e = recv_entry(c.count, c.root, b); break;
    default: e.kind = c.kind; break;  // one-sided: validate() refuses it
  }
  return e;
}

ledger_entry entry_of(const call& c, int rank, int size, traffic t) {
  ledger_entry e = mpi_entry_of(c, rank, size);
  e.bytes_sent = t.sent;
  e.bytes_received = t.received;
  return e;
}

std::unique_ptr<collectives> make_collectives(const backend_spec& b, const comm_handle& h) {
  return b.kind == backend::native ? make_native_collectives(h, b.algorithms)
                                   : make_mpi_collectives(h);
}

// ---- comm -----------------------------------------------------------------------------------

comm::comm(comm_handle h, const stack_options& o, int axis) : handle_(std::move(h)), axis_(axis) {
  if (!handle_.valid()) return;
  rank_ = handle_.rank();
  size_ = handle_.size();
  counts_.resize(static_cast<std::size_t>(size_));
  const auto wrap = [&](std::unique_ptr<collectives> inner, layer_position where) {
    if (!o.wrap) return inner;
    std::unique_ptr<collectives> outer = o.wrap(std::move(inner), where, axis);
    if (outer == nullptr) throw invalid_problem("comm: a layer wrapper returned no layer");
    return outer;
  };
  auto checked = std::make_unique<checked_collectives>(
      wrap(make_collectives(o.backend, handle_), layer_position::below));
  checker_ = checked.get();
  stack_ = wrap(std::move(checked), layer_position::above);
}

comm comm::split(int color, int key) const {
  const pmpi::internal own;
  MPI_Comm out = MPI_COMM_NULL;
  const mem::mpi_heap in_mpi;  // the communicator is MPI's
  check_mpi(MPI_Comm_split(native_handle(), color < 0 ? MPI_UNDEFINED : color, key, &out),
            "MPI_Comm_split");
  comm c;
  c.handle_ = comm_handle(out);
  if (!c.handle_.valid()) return c;
  c.rank_ = c.handle_.rank();
  c.size_ = c.handle_.size();
  c.counts_.resize(static_cast<std::size_t>(c.size_));
  c.stack_ = make_mpi_collectives(c.handle_);
  return c;
}

void comm::attach(ledger* l, bool fingerprint) {
  if (checker_ != nullptr) {
    checker_->attach(l, axis_, fingerprint);
    return;
  }
  if (l != nullptr || fingerprint)
    throw invalid_problem("comm: attach on a comm without a checking layer (a split comm)");
}

namespace {
void check_parts(const partition& parts, int size) {
  if (parts.parts() != size)
    throw invalid_problem("collective: a partition of " + std::to_string(parts.parts()) +
                          " parts for " + std::to_string(size) + " ranks");
}
}  // namespace

std::span<const std::int64_t> comm::window_counts(const partition& parts, std::int64_t lo,
                                                  std::int64_t hi, std::int64_t scale) {
  check_parts(parts, size_);
  for (int r = 0; r < size_; ++r) {
    const std::int64_t a = std::max(lo, parts.offset(r));
    const std::int64_t b = std::min(hi, parts.offset(r) + parts.size(r));
    counts_[static_cast<std::size_t>(r)] = std::max<std::int64_t>(b - a, 0) * scale;
  }
  return counts_;
}

std::span<const std::int64_t> comm::scaled_counts(const partition& parts, std::int64_t scale) {
  check_parts(parts, size_);
  for (int r = 0; r < size_; ++r) counts_[static_cast<std::size_t>(r)] = parts.size(r) * scale;
  return counts_;
}

// ---- mesh -----------------------------------------------------------------------------------

mesh::mesh(const comm& base, std::vector<int> dims, const stack_options& o)
    : dims_(std::move(dims)) {
  const int product = std::accumulate(dims_.begin(), dims_.end(), 1, std::multiplies<>());
  if (product != base.size())
    throw invalid_problem("mesh: dims multiply to " + std::to_string(product) + ", not " +
                          std::to_string(base.size()));
  const int n = static_cast<int>(dims_.size());
  std::vector<int> periods(dims_.size(), 0);
  MPI_Comm cart = MPI_COMM_NULL;
  check_mpi(MPI_Cart_create(base.native_handle(), n, dims_.data(), periods.data(), 0, &cart),
            "MPI_Cart_create");
  all_ = comm(comm_handle(cart), o, -1);
  coords_.assign(dims_.size(), 0);
  check_mpi(MPI_Cart_coords(cart, all_.rank(), n, coords_.data()), "MPI_Cart_coords");
  axes_.reserve(dims_.size());
  for (int a = 0; a < n; ++a) {
    std::vector<int> keep(dims_.size(), 0);
    keep[static_cast<std::size_t>(a)] = 1;
    MPI_Comm sub = MPI_COMM_NULL;
    check_mpi(MPI_Cart_sub(cart, keep.data(), &sub), "MPI_Cart_sub");
    axes_.emplace_back(comm_handle(sub), o, a);
  }
}

void mesh::attach(ledger* l, bool fingerprint) {
  all_.attach(l, fingerprint);
  for (auto& a : axes_) a.attach(l, fingerprint);
}

}  // namespace shardcheck::par
