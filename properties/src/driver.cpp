#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/invariance.hpp"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <rapidcheck.h>

#include "shardcheck/parallel/flight.hpp"
#include "shardcheck/properties/exit_codes.hpp"
#include "shardcheck/properties/footprint.hpp"
#include "shardcheck/properties/generators.hpp"
#include "shardcheck/properties/last_words.hpp"
#include "shardcheck/properties/shrink.hpp"

namespace shardcheck::prop {

// Ends the process when a case runs past its deadline. Only the leader prints the replay line;
// mpirun then ends the other ranks.
struct driver::watchdog {
  explicit watchdog(double seconds, bool speaks) : seconds_(seconds), speaks_(speaks) {
    thread_ = std::thread([this] { loop(); });
  }
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void arm(const std::string& line) {
    std::lock_guard lock(mutex_);
    line_ = line;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(speaks_ ? seconds_ : seconds_ + 2.0));
    armed_ = true;
    wake_.notify_all();
  }
  void disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!quit_) {
      if (!armed_) {
        wake_.wait(lock);
        continue;
      }
      if (wake_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !quit_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        if (speaks_) {
          std::fprintf(stderr,
                       "shardcheck: watchdog: a case ran longer than %g s: %s; ending the "
                       "job.\nreplay: %s\n",
                       seconds_, why().c_str(), line_.c_str());
          std::fflush(stderr);
        }
        std::_Exit(exit_code::watchdog);
      }
    }
  }
  // Whether the case was still progressing (flight.hpp's figures, this rank's): a call completed
  // within the last quarter of the limit (at least 1 s), and no wait as long.
  std::string why() const {
    const par::flight::progress now = par::flight::progress_now();
    const auto t = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
    const double recent = std::max(1.0, seconds_ / 4);
    const double since_call =
        now.last_call_ns > 0 ? 1e-9 * static_cast<double>(t - now.last_call_ns) : -1;
    const double waiting =
        now.waiting_since_ns > 0 ? 1e-9 * static_cast<double>(t - now.waiting_since_ns) : 0;
    char out[512];
    if (waiting >= recent)
      std::snprintf(out, sizeof out, "rank 0 has waited %.1f s in a call%s%s (a hung call?)",
                    waiting, now.waiting_in.empty() ? "" : ": ", now.waiting_in.c_str());
    else if (since_call >= 0 && since_call < recent)
      std::snprintf(out, sizeof out,
                    "it was still progressing (rank 0's last call completed %.1f s ago): a slow "
                    "case, not a hung one (raise --case-timeout)",
                    since_call);
    else
      std::snprintf(out, sizeof out,
                    "rank 0 has completed no call for %s (a kernel computing, or stuck in itself?)",
                    since_call >= 0 ? (std::to_string(static_cast<long>(since_call)) + " s").c_str()
                                    : "the whole case");
    return out;
  }
  double seconds_;
  bool speaks_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string line_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false, quit_ = false;
};

std::string shell_quoted(std::string_view s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
                                       "TUVWXYZ0123456789_-+=.,:/@%") == std::string_view::npos;
  if (plain) return std::string(s);
  std::string out = "'";
  for (const char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::vector<std::pair<std::string, std::string>> collective_mca_settings() {
  std::vector<std::pair<std::string, std::string>> out;
  constexpr std::string_view prefix = "OMPI_MCA_";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::size_t eq = kv.find('=');
    if (!kv.starts_with(prefix) || eq == std::string_view::npos) continue;
    const std::string_view name = kv.substr(prefix.size(), eq - prefix.size());
    if (name == "coll" || name.starts_with("coll_"))
      out.emplace_back(std::string(name), std::string(kv.substr(eq + 1)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string launch_command(int ranks) {
#if defined(MPICH_VERSION)
  return "mpiexec -n " + std::to_string(ranks);
#else
  return "mpirun -n " + std::to_string(ranks) + " --oversubscribe";
#endif
}

namespace {
// The options of verify that decide a case's verdict: `--property` unless all, `--case-timeout`
// unless the default.
std::string verdict_options(unsigned mask, double case_timeout) {
  std::string out;
  if ((mask | static_cast<unsigned>(property::runs)) != all_properties)
    out.append(" --property ").append(properties_to_string(mask));
  if (case_timeout != default_case_timeout) {
    std::ostringstream seconds;
    seconds << case_timeout;
    out.append(" --case-timeout ").append(seconds.str());
  }
  return out;
}

// `mpirun -n P --oversubscribe` and the collective settings in force, as `--mca NAME VALUE`.
std::string launch_with_settings(int ranks) {
  std::string out = launch_command(ranks);
  for (const auto& [name, value] : collective_mca_settings())
    out.append(" --mca ").append(shell_quoted(name)).append(" ").append(shell_quoted(value));
  return out;
}
}  // namespace

std::string replay_command(std::string_view program, const par::run_case& c, unsigned mask,
                           double case_timeout, int repeat) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict) on `"literal" + std::string` here.
  std::string out = launch_with_settings(c.p);
  out.append(" ").append(shell_quoted(program)).append(" verify");
  out.append(verdict_options(mask, case_timeout));
  if (repeat > 1) out.append(" --repeat ").append(std::to_string(repeat));
  return out.append(" --replay ").append(shell_quoted(c.to_string()));
}

int repeat_for(int reproduced, int reruns) {
  const double rate = (reproduced + 1.0) / (reruns + 2.0);
  const double runs = rate >= 1 ? 1 : std::ceil(std::log(0.01) / std::log1p(-rate));
  return static_cast<int>(std::clamp(runs, 1.0 + reruns, 1000.0));
}

std::string shrink_command(std::string_view program, const par::run_case& c, unsigned mask,
                           double case_timeout) {
  std::string out = shell_quoted(program);
  out.append(" shrink").append(verdict_options(mask, case_timeout));
  out.append(" --replay ").append(shell_quoted(c.to_string()));
  return out.append(" -- ").append(launch_with_settings(c.p));
}

driver::driver(par::comm& world, lookup find, double case_timeout_seconds, std::string program)
    : world_(world),
      find_(std::move(find)),
      timeout_(case_timeout_seconds),
      program_(std::move(program)) {
  for (int p = 1; p <= world_.size(); ++p) {
    subs_.push_back(world_.split(world_.rank() < p ? 0 : -1, world_.rank()));
    reports_.push_back(world_.split(world_.rank() < p ? 0 : -1, world_.rank()));
  }
  signals_ = world_.split(0, world_.rank());
  dog_ = std::make_unique<watchdog>(timeout_, leader());
  last_words::install(world_.rank(), leader());
}

driver::~driver() = default;

namespace {
constexpr int stop_length = -1;
constexpr int command_tag = 1, case_ended_tag = 2;

// A rank with nothing to do until rank 0 tells it (the next command, the end of a case it takes
// no part in) waits for that word without polling MPI all along: between tests it sleeps an
// eighth of the time it has waited so far, at most a millisecond. Ranks oversubscribed on few
// cores (64 on 2 in ctest's property.ranks64) so leave their cores to the ranks of the case,
// and a wait that ends soon sleeps little. The word is a point-to-point message, small enough to
// be sent eagerly: no progress is asked of the sleeping rank, as a collective's would be.
void receive_idle(int& word, int tag, const par::comm& signals) {
  using clock = std::chrono::steady_clock;
  MPI_Request r = MPI_REQUEST_NULL;
  par::check_mpi(MPI_Irecv(&word, 1, MPI_INT, 0, tag, signals.native_handle(), &r), "driver");
  const clock::time_point start = clock::now();
  while (true) {
    int done = 0;
    par::check_mpi(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "driver");
    if (done != 0) return;
    std::this_thread::sleep_for(
        std::min<clock::duration>((clock::now() - start) / 8, std::chrono::milliseconds(1)));
  }
}

// Rank 0's word to ranks [from, size) of signals.
void tell(int word, int tag, int from, const par::comm& signals) {
  for (int r = std::max(from, 1); r < signals.size(); ++r)
    par::check_mpi(MPI_Send(&word, 1, MPI_INT, r, tag, signals.native_handle()), "driver");
}

void send_command(const par::comm& world, const par::comm& signals, const std::string& message) {
  int length = static_cast<int>(message.size());
  tell(length, command_tag, 1, signals);
  par::check_mpi(
      MPI_Bcast(const_cast<char*>(message.data()), length, MPI_CHAR, 0, world.native_handle()),
      "command");
}
}  // namespace

case_verdict driver::execute(const std::string& message) {
  // message: "<mask> <case line>"
  const std::size_t space = message.find(' ');
  const auto mask = static_cast<unsigned>(std::stoul(message.substr(0, space)));
  const std::string line = message.substr(space + 1);
  verdict mine;
  const std::uint64_t serial = ++serial_;
  int abandoned = 0;  // the case's p when its ranks were out of step
  dog_->arm(line);
  // The case, once every rank knows it runs (the same on every rank), and its outputs when they
  // are compared with another run's (invariance) or digested (keep_digests).
  std::optional<par::run_case> ran;
  const subject* s = nullptr;
  bool compare = false;
  kept_outputs kept;
  try {
    par::run_case c = par::run_case::parse(line);
    const std::string replay = replay_command(program_, c, mask, timeout_);
    dog_->arm(replay);
    last_words::running(replay, shrink_command(program_, c, mask, timeout_));
    s = find_(c.strategy);
    if (s == nullptr || s->k == nullptr)
      throw invalid_problem("unknown strategy '" + c.strategy + "'");
    if (c.p > world_.size())
      throw invalid_problem("the case needs p=" + std::to_string(c.p) + " workers; only " +
                            std::to_string(world_.size()) + " ranks were launched");
    compare = keep_digests_ || ((mask & static_cast<unsigned>(property::invariance)) != 0 &&
                                s->k->info().invariant.any());
    ran = c;
    if (world_.rank() < c.p) {
      const par::flight::watch watch(reports_[static_cast<std::size_t>(c.p - 1)].native_handle(),
                                     serial);
      mine = run_on_rank(*s, c, subs_[static_cast<std::size_t>(c.p - 1)], mask,
                         compare ? &kept : nullptr);
      abandoned = par::flight::case_abandoned() ? c.p : 0;
    }
    if ((mask & static_cast<unsigned>(property::invariance)) != 0 && !s->k->info().invariant.any())
      mine.not_claimed |= static_cast<unsigned>(property::invariance);
  } catch (const std::exception& e) {
    mine.failed |= static_cast<unsigned>(property::runs);
    mine.message = std::string("runs: ") + e.what();
  }

  // The ranks outside the case wait, idle, for rank 0 (always in it) to be done with it.
  if (ran && ran->p < world_.size()) {
    int word = 0;
    if (world_.rank() == 0)
      tell(word, case_ended_tag, ran->p, signals_);
    else if (world_.rank() >= ran->p)
      receive_idle(word, case_ended_tag, signals_);
  }
  case_verdict out;
  const MPI_Comm w = world_.native_handle();
  if (ran && compare) compare_outputs(*s, *ran, mask, kept, mine, out, abandoned);
  unsigned failed = mine.failed;
  par::check_mpi(MPI_Allreduce(&mine.failed, &failed, 1, MPI_UNSIGNED, MPI_BOR, w), "verdict");
  unsigned not_claimed = mine.not_claimed;
  par::check_mpi(MPI_Allreduce(&mine.not_claimed, &not_claimed, 1, MPI_UNSIGNED, MPI_BOR, w),
                 "verdict");
  unsigned not_measured = mine.not_measured;
  par::check_mpi(MPI_Allreduce(&mine.not_measured, &not_measured, 1, MPI_UNSIGNED, MPI_BOR, w),
                 "verdict");
  int first = mine.failed != 0 ? world_.rank() : world_.size();
  int lowest = first;
  par::check_mpi(MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, w), "verdict");
  double worst[4] = {mine.worst_error, mine.worst_memory, mine.projected[0], mine.projected[1]},
         worst_all[4] = {0, 0, 0, 0};
  par::check_mpi(MPI_Allreduce(worst, worst_all, 4, MPI_DOUBLE, MPI_MAX, w), "verdict");
  static_assert(sizeof(error_figures::cells) == error_figures::size * 3 * sizeof(double));
  par::check_mpi(MPI_Allreduce(mine.errors.cells.data(), out.errors.cells.data(),
                               static_cast<int>(error_figures::size * 3), MPI_DOUBLE, MPI_MAX, w),
                 "verdict");
  long long bytes[5] = {mine.peak_bytes, mine.bound_bytes, mine.recorded_sent, mine.mpi_peak_bytes,
                        abandoned};
  long long bytes_all[5] = {0, 0, 0, 0, 0};
  par::check_mpi(MPI_Allreduce(bytes, bytes_all, 5, MPI_LONG_LONG, MPI_MAX, w), "verdict");
  const auto retire = static_cast<int>(bytes_all[4]);
  out.failed = failed;
  out.not_claimed = not_claimed & ~failed;
  out.not_measured = not_measured & ~failed & ~out.not_claimed;
  out.worst_error = worst_all[0];
  out.worst_memory = worst_all[1];
  out.projected[0] = worst_all[2];
  out.projected[1] = worst_all[3];
  out.peak_bytes = bytes_all[0];
  out.bound_bytes = bytes_all[1];
  out.recorded_sent = bytes_all[2];
  out.mpi_peak_bytes = bytes_all[3];
  if (lowest < world_.size()) {
    if (lowest == 0) {
      out.message = mine.message;
    } else if (world_.rank() == lowest) {
      par::check_mpi(
          MPI_Send(mine.message.data(), static_cast<int>(mine.message.size()), MPI_CHAR, 0, 7, w),
          "verdict message");
    } else if (world_.rank() == 0) {
      MPI_Status st;
      par::check_mpi(MPI_Probe(lowest, 7, w, &st), "verdict message");
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      out.message.assign(static_cast<std::size_t>(n), '\0');
      par::check_mpi(MPI_Recv(out.message.data(), n, MPI_CHAR, lowest, 7, w, MPI_STATUS_IGNORE),
                     "verdict message");
    }
  }
  // Ranks out of step left calls on the case's communicator that never end: every rank retires it
  // (never freed) and makes a new one.
  if (retire > 0) {
    auto& old = subs_[static_cast<std::size_t>(retire - 1)];
    if (old.valid()) par::flight::abandon(old.native_handle());
    old = world_.split(world_.rank() < retire ? 0 : -1, world_.rank());
  }
  dog_->disarm();
  last_words::idle();
  return out;
}

void driver::compare_outputs(const subject& s, const par::run_case& c, unsigned mask,
                             const kept_outputs& kept, verdict& mine, case_verdict& out,
                             int& abandoned) {
  const MPI_Comm w = world_.native_handle();
  const auto runs = static_cast<unsigned>(property::runs);
  // Only a case that ran everywhere, its ranks in step, has outputs to compare.
  int state[2] = {(mine.failed & runs) != 0 ? 1 : 0, abandoned};
  par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, state, 2, MPI_INT, MPI_MAX, w), "outputs");
  if (state[0] != 0 || state[1] != 0) return;
  // The shapes and the variants read the case alone: the same on every rank, thrown or not.
  std::vector<output_shape> shapes;
  std::vector<variant> variants;
  const bool judge =
      (mask & static_cast<unsigned>(property::invariance)) != 0 && s.k->info().invariant.any();
  std::string unmade;
  try {
    shapes = output_shapes(*s.k, c);
    if (judge) variants = variants_of(*s.k, c);
  } catch (const std::exception& e) {
    unmade = e.what();
  }
  const auto fail = [&](const std::string& why) {
    if (!leader()) return;
    mine.failed |= static_cast<unsigned>(property::invariance);
    if (mine.message.empty()) mine.message = "invariance: " + why;
  };
  if (!unmade.empty()) {
    if (judge) fail("the case's variants cannot be made: " + unmade);
    return;
  }
  const output_digests first = digest(kept, shapes, w);
  if (keep_digests_ && leader())
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      out.output_names.push_back(shapes[i].name);
      out.digests.push_back(first.of(i));
    }
  if (!judge) return;
  // A case with no variant (p = 1 under a claim of workers and partition alone) judges nothing.
  if (variants.empty()) mine.not_claimed |= static_cast<unsigned>(property::invariance);
  const std::string replay = replay_command(program_, c, mask, timeout_);
  for (const variant& v : variants) {
    kept_outputs other;
    verdict theirs;
    const std::uint64_t serial = ++serial_;
    dog_->arm(replay);  // each run of the case has the watchdog's whole limit
    int lost = 0;
    if (world_.rank() < v.c.p) {
      const par::flight::watch watch(reports_[static_cast<std::size_t>(v.c.p - 1)].native_handle(),
                                     serial);
      theirs = run_on_rank(s, v.c, subs_[static_cast<std::size_t>(v.c.p - 1)], 0, &other);
      lost = par::flight::case_abandoned() ? v.c.p : 0;
    }
    int again[2] = {(theirs.failed & runs) != 0 ? 1 : 0, lost};
    par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, again, 2, MPI_INT, MPI_MAX, w), "outputs");
    if (again[1] != 0) {
      abandoned = again[1];
      return fail("the same case at " + v.setting + " left its ranks out of step (" +
                  v.c.to_string() + ")");
    }
    if (again[0] != 0)
      return fail("the same case at " + v.setting + " does not run (" + v.c.to_string() + ")");
    const output_digests second = digest(other, shapes, w);
    if (second == first) continue;
    return fail(first_difference(kept, first, v.base, other, second, v.setting, shapes, w));
  }
}

case_verdict driver::run(const par::run_case& c, unsigned mask) {
  if (std::getenv("SHARDCHECK_TRACE") != nullptr)
    std::fprintf(stderr, "case: %s\n", c.to_string().c_str());
  const std::string message = std::to_string(mask) + " " + c.to_string();
  // A log that cannot be written (a full disk) ends the job at once with the code of a file that
  // cannot be written (exit 2): an exception here would be taken by RapidCheck for the property
  // failing.
  if (case_log_ != nullptr && (std::fprintf(case_log_.get(), "%s\n", c.to_string().c_str()) < 0 ||
                               std::fflush(case_log_.get()) != 0)) {
    std::fprintf(stderr, "shardcheck: --log-cases: cannot write %s: %s\n", case_log_path_.c_str(),
                 std::strerror(errno));
    std::fflush(stdout);
    std::fflush(stderr);
    if (world_.size() == 1) std::_Exit(exit_code::usage);
    PMPI_Abort(world_.native_handle(), exit_code::usage);  // not a kernel's (pmpi.hpp)
  }
  send_command(world_, signals_, message);
  return execute(message);
}

void driver::log_cases(const std::string& path) {
  case_log_path_ = path;
  case_log_.reset(std::fopen(path.c_str(), "a"));
  if (case_log_ == nullptr)
    throw error("--log-cases: cannot open " + path + " for appending: " + std::strerror(errno));
}

void driver::stop() {
  tell(stop_length, command_tag, 1, signals_);
  finish();
}

// Every rank at the end of the run: the flight recorder's reports no case read are received, so
// that none is left to MPI_Finalize.
void driver::finish() {
  for (par::comm& r : reports_)
    if (r.valid()) par::flight::drain(r.native_handle());
}

void driver::serve() {
  while (true) {
    int length = 0;
    receive_idle(length, command_tag, signals_);
    if (length == stop_length) return finish();
    std::string message(static_cast<std::size_t>(length), '\0');
    par::check_mpi(MPI_Bcast(message.data(), length, MPI_CHAR, 0, world_.native_handle()),
                   "command");
    (void)execute(message);
  }
}

unsigned named_property(const case_verdict& v) {
  for (unsigned bit = 1; bit <= all_properties; bit <<= 1)
    if ((v.failed & bit) != 0 &&
        v.message.starts_with(std::string(to_string(static_cast<property>(bit))) + ":"))
      return bit;
  return v.failed;
}

driver::attempts driver::run_until_failure(const par::run_case& c, unsigned mask, unsigned target,
                                           int runs) {
  attempts out;
  do {
    out.v = run(c, mask);
    ++out.runs;
  } while ((out.v.failed & target) == 0 && out.runs < runs);
  return out;
}

int driver::reproduce(const par::run_case& c, unsigned mask, const case_verdict& v, int n) {
  const unsigned target = named_property(v);
  int failed = 0;
  for (int i = 0; i < n; ++i) failed += (run(c, mask).failed & target) != 0 ? 1 : 0;
  return failed;
}

driver::shrunk driver::minimize(const subject& s, const par::run_case& c, const case_verdict& v,
                                const suite_options& o, int runs_per_candidate) {
  const unsigned target = named_property(v);
  case_verdict kept = v;
  const shrink_budget budget{o.shrink_max_runs, o.shrink_seconds};
  const local_minimum m =
      shrink_to_local_minimum(c, *s.k, o.pins, budget, [&](const par::run_case& d) {
        par::run_case named = d;
        named.strategy = c.strategy;
        const case_verdict w = run_until_failure(named, o.mask, target, runs_per_candidate).v;
        if ((w.failed & target) == 0) return false;
        kept = w;
        return true;
      });
  shrunk out{m.c, kept, m.runs, m.reached};
  out.c.strategy = c.strategy;
  return out;
}

namespace {
// One run of the property on a drawn case, as RapidCheck's search and shrinking see it.
struct evaluation {
  enum { pass, discard, fail } result = pass;
  std::string message;
};

// The size the i-th of n cases is drawn at: 0 … max_size spread evenly over the cases, the
// largest always reached. rc::check's schedule, so that a seed draws the cases it draws there.
int size_for(int n, int max_size, int i) {
  const int sizes = max_size + 1, regular = n / sizes * sizes;
  if (i < regular) return i % sizes;
  const int rest = n - regular;
  return rest == 1 ? 0 : i % sizes * max_size / (rest - 1);
}
}  // namespace

// RapidCheck is driven through its public API: the property is a generator (rc::gen::exec) that
// draws a case and runs it; the cases are searched and a failure shrunk here, as rc::check does
// (sizes above, one split of the seed's rc::Random per case, at most 10 discards per success;
// then the first failing shrink of the failure taken, until none fails, and the smallest run once
// more), so that the same seed draws the same cases. rc::check itself reads its seed and case
// count once per process (RC_PARAMS), and prints its own report: here each check has its own and
// the report is shardcheck's.
strategy_report driver::check(const std::string& name, const subject& s, const suite_options& o) {
  using clock = std::chrono::steady_clock;
  strategy_report report;
  report.name = name;
  const auto start = clock::now();
  auto last_progress = start;
  int evaluated = 0, over_limit = 0;
  bool failing = false;
  // Whether the first failure found reproduced in fewer than all of its re-runs: then a shrink
  // runs each candidate up to `candidate_runs` times, as many as a failure at the measured rate
  // needs to show with 99 % probability (repeat_for: 21 at 1 of 8), and keeps it if one fails.
  bool intermittent = false;
  int candidate_runs = 1;
  draw_tally tally;
  const auto gen = case_for(*s.k, world_.size(), o.pins, &tally);
  const auto property = rc::gen::exec([&]() -> evaluation {
    try {
      par::run_case c = *gen;
      c.strategy = name;
      if (!failing) report.declined = tally.declined;
      if (o.memory_limit != INT64_MAX && footprint_of(*s.k, c, o.mask).bytes > o.memory_limit) {
        ++over_limit;
        return {evaluation::discard, "above the memory limit"};
      }
      case_verdict v = run(c, o.mask);
      if (v.failed == 0 && intermittent)
        v = run_until_failure(c, o.mask, ~0U, candidate_runs - 1).v;
      ++evaluated;
      if (!failing) ++report.cases;
      if (!failing && o.on_case) o.on_case(c, v);
      if (o.progress && clock::now() - last_progress > std::chrono::seconds(5)) {
        last_progress = clock::now();
        std::fprintf(stderr, "  %s: %d/%d cases%s\n", name.c_str(), report.cases, o.cases,
                     failing ? " (shrinking a failure)" : "");
      }
      if (v.worst_memory >= report.worst_memory && v.failed == 0) {
        report.worst_memory = v.worst_memory;
        report.peak_bytes = v.peak_bytes;
        report.bound_bytes = v.bound_bytes;
      }
      report.worst_error = std::max(report.worst_error, v.worst_error);
      report.errors.merge(v.errors);
      for (int k = 0; k < 2; ++k)
        report.projected[k] = std::max(report.projected[k], v.projected[k]);
      report.recorded_sent = std::max(report.recorded_sent, v.recorded_sent);
      report.mpi_peak_bytes = std::max(report.mpi_peak_bytes, v.mpi_peak_bytes);
      report.not_claimed |= v.not_claimed;
      report.judged |= o.mask & ~v.not_claimed & ~v.not_measured;
      report.not_measured |= v.not_measured;
      if (v.failed != 0) {
        if (!failing && o.reruns > 0) {
          const int reproduced = reproduce(c, o.mask, v, o.reruns);
          intermittent = reproduced < o.reruns;
          if (intermittent) candidate_runs = repeat_for(reproduced, o.reruns);
        }
        failing = true;
        report.failure = v;
        report.replay = c.to_string();
        return {evaluation::fail, v.message};
      }
      return {};
    } catch (const rc::GenerationFailure& e) {
      return {evaluation::discard, std::string("Generation failed with message:\n") + e.what()};
    } catch (const std::exception& e) {
      return {evaluation::fail, std::string("Exception thrown with message:\n") + e.what()};
    } catch (...) {
      return {evaluation::fail, "Unknown object thrown"};
    }
  });
  constexpr int max_size = 100, discards_per_success = 10;
  rc::Random random(o.seed);
  int successes = 0, discards = 0, recent_discards = 0;
  std::optional<rc::Shrinkable<evaluation>> failed;
  std::string gave_up;
  while (successes < o.cases) {
    const int size = size_for(o.cases, max_size, successes) + recent_discards / 10;
    rc::Shrinkable<evaluation> drawn = property(random.split(), size);
    const evaluation e = drawn.value();
    if (e.result == evaluation::fail) {
      failed = std::move(drawn);
      break;
    }
    if (e.result == evaluation::pass) {
      ++successes;
      recent_discards = 0;
    } else if (++recent_discards, ++discards > discards_per_success * o.cases) {
      gave_up = drawn.value().message;
      break;
    }
  }
  std::string failed_message;
  if (failed) {
    rc::Shrinkable<evaluation> best = *failed;
    auto shrinks = best.shrinks();
    while (auto shrink = shrinks.next()) {
      if (shrink->value().result != evaluation::fail) continue;
      best = std::move(*shrink);
      shrinks = best.shrinks();
    }
    failed_message = best.value().message;
  }
  if (failing && o.local_minimum) {
    if (o.progress)
      std::fprintf(stderr, "  %s: simplifying the failing case to a local minimum\n", name.c_str());
    shrunk m = minimize(s, par::run_case::parse(report.replay), report.failure, o, candidate_runs);
    report.failure = m.v;
    report.replay = m.c.to_string();
    report.shrink_runs = m.runs;
    report.local_minimum = m.local_minimum;
  }
  if (failing && o.reruns > 0) {
    if (o.progress)
      std::fprintf(stderr, "  %s: running the failing case %d more times\n", name.c_str(),
                   o.reruns);
    report.reruns = o.reruns;
    report.reproduced =
        reproduce(par::run_case::parse(report.replay), o.mask, report.failure, o.reruns);
    // Found intermittent only now (its first failure reproduced in every re-run): the final pass
    // again, each candidate run as many times as its measured rate asks, and the case it ends at
    // measured.
    if (report.reproduced < o.reruns && !intermittent && o.local_minimum) {
      intermittent = true;
      candidate_runs = repeat_for(report.reproduced, o.reruns);
      shrunk m =
          minimize(s, par::run_case::parse(report.replay), report.failure, o, candidate_runs);
      report.failure = m.v;
      report.replay = m.c.to_string();
      report.shrink_runs += m.runs;
      report.local_minimum = m.local_minimum;
      report.reproduced =
          reproduce(par::run_case::parse(report.replay), o.mask, report.failure, o.reruns);
    }
  }
  // An opt-in property judged on some case is judged: cases with nothing to vary (p = 1) are not
  // the kernel's claim missing.
  report.not_claimed &= ~(report.judged & opt_in_properties);
  if (!failing) report.declined = tally.declined;
  report.declined_example = tally.example;
  report.seconds = std::chrono::duration<double>(clock::now() - start).count();
  report.passed = !failing && !failed && gave_up.empty() && successes == o.cases;
  if (!failing && !report.passed) {
    std::string why = "RapidCheck could not run the property";
    if (failed)
      why += ": " + failed_message;
    else if (!gave_up.empty() && tally.declined > 0 && tally.declined >= over_limit)
      why += " (gave up): " + name + " declined " + std::to_string(tally.declined) + " of the " +
             std::to_string(tally.declined + tally.accepted) + " cases drawn (e.g. " +
             tally.example + "): its preconditions leave almost nothing to draw with " +
             std::to_string(world_.size()) + " ranks and these pins";
    else if (over_limit > 0)
      why += " (gave up): " + std::to_string(over_limit) +
             " drawn cases were above the memory limit of " + human_bytes(o.memory_limit) +
             " per rank (--memory-limit)";
    else
      why += " (gave up): " + gave_up;
    report.failure.message = why;
  }
  return report;
}

}  // namespace shardcheck::prop
