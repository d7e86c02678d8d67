#include "shardcheck/parallel/flight.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::par::flight {

namespace {
using steady = std::chrono::steady_clock;
constexpr std::int64_t report_after_ns = 20'000'000;  // a wait this long is reported
constexpr int report_tag = 1;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

// What a message says. A report: what a rank does (nothing: its report is withdrawn). The
// confirmation: a query (members: the wait each rank was reported in), its answers (index: the
// query's number), and the verdict (text: the message every rank throws).
enum class doing : std::int64_t {
  nothing = 0,
  in_call = 1,
  returned = 2,
  unjudged = 3,
  query = 10,
  still = 11,
  moved = 12,
  verdict = 13
};

struct report {
  doing what = doing::nothing;
  std::uint64_t index = 0;            // in_call: the call's index on its communicator
  std::vector<std::int64_t> members;  // in_call: its communicator's ranks, as ranks of the case
  std::string text;                   // what the message says of this rank
  std::int64_t wait = 0;              // which of the rank's watched waits this is
  // How far the rank got in this run of the kernel, per communicator it called on: its ranks (as
  // ranks of the case) and the calls completed there, as {n, rank_1 … rank_n, calls} in turn.
  std::vector<std::int64_t> progress;
};

// The message: {serial, what, index, member count, wait, progress count}, the members, the
// progress, then the text.
std::vector<char> encode(std::uint64_t serial, const report& r) {
  const std::int64_t head[6] = {static_cast<std::int64_t>(serial),
                                static_cast<std::int64_t>(r.what),
                                static_cast<std::int64_t>(r.index),
                                static_cast<std::int64_t>(r.members.size()),
                                r.wait,
                                static_cast<std::int64_t>(r.progress.size())};
  const std::size_t ints = r.members.size() + r.progress.size();
  std::vector<char> out(sizeof head + ints * sizeof(std::int64_t) + r.text.size());
  char* at = out.data();
  std::memcpy(at, head, sizeof head);
  at += sizeof head;
  for (const auto* v : {&r.members, &r.progress}) {
    if (!v->empty()) std::memcpy(at, v->data(), v->size() * sizeof(std::int64_t));
    at += v->size() * sizeof(std::int64_t);
  }
  if (!r.text.empty()) std::memcpy(at, r.text.data(), r.text.size());
  return out;
}

bool decode(const std::vector<char>& in, std::uint64_t serial, report& r) {
  std::int64_t head[6];
  if (in.size() < sizeof head) return false;
  std::memcpy(head, in.data(), sizeof head);
  if (static_cast<std::uint64_t>(head[0]) != serial || head[3] < 0 || head[5] < 0) return false;
  const auto n = static_cast<std::size_t>(head[3]), k = static_cast<std::size_t>(head[5]);
  if (in.size() < sizeof head + (n + k) * sizeof(std::int64_t)) return false;
  r.what = static_cast<doing>(head[1]);
  r.index = static_cast<std::uint64_t>(head[2]);
  r.wait = head[4];
  r.members.resize(n);
  r.progress.resize(k);
  const char* at = in.data() + sizeof head;
  if (n > 0) std::memcpy(r.members.data(), at, n * sizeof(std::int64_t));
  at += n * sizeof(std::int64_t);
  if (k > 0) std::memcpy(r.progress.data(), at, k * sizeof(std::int64_t));
  at += k * sizeof(std::int64_t);
  r.text.assign(at, in.data() + in.size());
  return true;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() > 1 ? "ranks " : "rank ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  return out;
}

std::string calls_text(std::uint64_t n) {
  return std::to_string(n) + (n == 1 ? " call" : " calls");
}

// Progress as the watchdog's thread reads it.
std::atomic<std::uint64_t> calls_done{0};
std::atomic<std::int64_t> last_call_at{0}, waiting_since{0};
std::mutex waiting_mutex;
std::string waiting_text;  // guarded by waiting_mutex

// Messages sent to and received from each rank of a reports communicator, over every case.
struct tally {
  std::vector<long long> sent, received;
};
std::map<MPI_Comm, tally>& tallies() {
  static std::map<MPI_Comm, tally> t;
  return t;
}
tally& tally_of(MPI_Comm reports, int p) {
  tally& t = tallies()[reports];
  t.sent.resize(static_cast<std::size_t>(p), 0);
  t.received.resize(static_cast<std::size_t>(p), 0);
  return t;
}

// Communicators with an abandoned call (shardcheck calls MPI from one thread).
std::vector<MPI_Comm>& abandoned_list() {
  static std::vector<MPI_Comm> list;
  return list;
}
}  // namespace

// The open watch's state.
struct state {
  MPI_Comm reports = MPI_COMM_NULL;
  int me = 0, p = 1;
  std::uint64_t serial = 0;
  std::vector<std::pair<MPI_Comm, std::string>> names;
  std::string phase = "setting up";
  std::uint64_t phase_calls = 0;
  // The communicators this run of the kernel called on: calls completed on each, and its ranks
  // and name, taken when first needed and at the latest before MPI frees it (forget), so that
  // no freed handle is ever read. Cleared when a run begins (phase "forward").
  struct comm_info {
    MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL once freed
    std::uint64_t done = 0;
    bool known = false;
    std::vector<std::int64_t> members;
    std::string label;
  };
  std::vector<comm_info> used;
  call_record last;
  std::size_t last_used = 0;  // last's communicator in `used`
  bool has_last = false;
  MPI_Request* current = nullptr;  // the request the open wait tests
  std::vector<report> seen;        // per rank of the case, this rank's own included
  std::int64_t wait = 0;           // this rank's watched waits so far (the current one's number)
  bool abandoned = false;
  std::string verdict;  // the ranks are out of step: the message (from a rank's confirmation)
  // This rank's confirmation in flight: its number (0: none), the waits it asked about, the
  // answers still due, and whether every answer so far said "still there".
  std::uint64_t query = 0;
  std::vector<std::int64_t> asked, refuted;  // refuted: the last snapshot an answer refuted
  int due = 0;
  bool confirmed = true;
  std::vector<std::pair<MPI_Request, std::vector<char>>> sends;  // messages not yet delivered
  tally* counted = nullptr;                                      // this communicator's

  std::uint64_t serial_queries = 0;
  comm_info& info(MPI_Comm c);
  void know(comm_info& i) const;
  [[nodiscard]] std::vector<std::int64_t> progress();
  [[nodiscard]] bool past(const report& q, const std::vector<std::int64_t>& members,
                          std::uint64_t index) const;
  std::string label(MPI_Comm c) const;
  std::string call_text(const call_record& c, comm_info& i) const;
  std::vector<std::int64_t> members(MPI_Comm c) const;
  void send(int q, const report& r);
  void send_all(const report& r);
  [[nodiscard]] std::vector<std::int64_t> snapshot() const;
  void judge();
  void receive();
  void settle_sends();
  [[nodiscard]] bool can_complete(int r) const;
  [[nodiscard]] bool stuck() const;
  [[nodiscard]] std::string message() const;
};

namespace {
state* open_watch = nullptr;
}

std::string state::label(MPI_Comm c) const {
  for (const auto& [comm, text] : names) {
    int same = MPI_UNEQUAL;
    MPI_Comm_compare(c, comm, &same);
    if (same == MPI_IDENT) return text;
  }
  for (const auto& [comm, text] : names) {
    int same = MPI_UNEQUAL;
    MPI_Comm_compare(c, comm, &same);
    if (same == MPI_CONGRUENT) return "a communicator of the ranks of " + text;
  }
  std::string out = "the communicator of ";
  std::vector<int> ranks;
  for (std::int64_t m : members(c)) ranks.push_back(static_cast<int>(m));
  return out + ranks_text(ranks);
}

state::comm_info& state::info(MPI_Comm c) {
  for (comm_info& i : used)
    if (i.comm == c) return i;
  used.push_back({c, 0, false, {}, {}});
  return used.back();
}

void state::know(comm_info& i) const {
  if (i.known || i.comm == MPI_COMM_NULL) return;
  i.members = members(i.comm);
  i.label = label(i.comm);
  i.known = true;
}

std::vector<std::int64_t> state::progress() {
  std::vector<std::int64_t> out;
  for (comm_info& i : used) {
    know(i);
    if (!i.known || i.done == 0) continue;
    out.push_back(static_cast<std::int64_t>(i.members.size()));
    out.insert(out.end(), i.members.begin(), i.members.end());
    out.push_back(static_cast<std::int64_t>(i.done));
  }
  return out;
}

// Whether rank q's report shows it past call #index on a communicator of `members`: it completed
// more than `index` calls on one (a member past the call has made it, so the call can end).
bool state::past(const report& q, const std::vector<std::int64_t>& members,
                 std::uint64_t index) const {
  for (std::size_t at = 0; at < q.progress.size();) {
    const auto n = static_cast<std::size_t>(q.progress[at]);
    if (at + n + 2 > q.progress.size()) return false;
    const auto first = q.progress.begin() + static_cast<std::ptrdiff_t>(at + 1);
    if (n == members.size() && std::equal(members.begin(), members.end(), first) &&
        static_cast<std::uint64_t>(q.progress[at + 1 + n]) > index)
      return true;
    at += n + 2;
  }
  return false;
}

std::string state::call_text(const call_record& c, comm_info& i) const {
  know(i);
  std::string out = std::string(to_string(c.kind)) + " #" + std::to_string(c.index) + " on " +
                    (i.known ? i.label : "a communicator since freed");
  if (c.elem_bytes > 0) {
    out += " (" + std::to_string(c.count) + " × " + std::to_string(c.elem_bytes) + " B";
    if (c.root >= 0) out += ", root " + std::to_string(c.root);
    out += ")";
  }
  return out;
}

// The ranks of c as ranks of the case (−1: not one of the case's ranks).
std::vector<std::int64_t> state::members(MPI_Comm c) const {
  MPI_Group g = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  MPI_Comm_group(c, &g);
  MPI_Comm_group(reports, &all);
  int n = 0;
  MPI_Group_size(g, &n);
  std::vector<int> from(static_cast<std::size_t>(n)), to(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) from[static_cast<std::size_t>(i)] = i;
  if (n > 0) MPI_Group_translate_ranks(g, n, from.data(), all, to.data());
  MPI_Group_free(&g);
  MPI_Group_free(&all);
  std::vector<std::int64_t> out;
  for (int r : to) out.push_back(r == MPI_UNDEFINED ? -1 : r);
  std::sort(out.begin(), out.end());
  return out;
}

void state::send(int q, const report& r) {
  sends.emplace_back(MPI_REQUEST_NULL, encode(serial, r));
  auto& [request, bytes] = sends.back();
  MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, q, report_tag, reports,
            &request);
  ++counted->sent[static_cast<std::size_t>(q)];
}

// Reports go to every other rank; a rank's own is kept in seen.
void state::send_all(const report& r) {
  if (r.what != doing::query && r.what != doing::verdict) seen[static_cast<std::size_t>(me)] = r;
  for (int q = 0; q < p; ++q)
    if (q != me) send(q, r);
  settle_sends();
}

// The wait each rank is reported in (−1: none reported).
std::vector<std::int64_t> state::snapshot() const {
  std::vector<std::int64_t> out;
  for (const report& r : seen) out.push_back(r.what == doing::nothing ? -1 : r.wait);
  return out;
}

// When the reports say no wait can complete, asks every rank whether it is still in the wait it
// was reported in (once per snapshot): a report may be stale, its withdrawal still on the way.
// Every rank answering "still there" makes the snapshot true at once — a rank leaves a wait only
// when it can complete — and the ranks are out of step.
void state::judge() {
  if (query != 0 || !stuck()) return;
  const std::vector<std::int64_t> now = snapshot();
  if (now == refuted) return;
  asked = now;
  query = ++serial_queries;
  due = p - 1;
  confirmed = true;
  report q;
  q.what = doing::query;
  q.index = query;
  q.members = asked;
  send_all(q);
}

void state::settle_sends() {
  std::erase_if(sends, [](auto& s) {
    int done = 0;
    MPI_Test(&s.first, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

void state::receive() {
  while (true) {
    int any = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, report_tag, reports, &any, &st);
    if (any == 0) return;
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    std::vector<char> bytes(static_cast<std::size_t>(std::max(n, 0)));
    MPI_Recv(bytes.data(), n, MPI_BYTE, st.MPI_SOURCE, report_tag, reports, MPI_STATUS_IGNORE);
    ++counted->received[static_cast<std::size_t>(st.MPI_SOURCE)];
    report r;
    if (!decode(bytes, serial, r)) continue;  // an earlier case's
    const int from = st.MPI_SOURCE;
    switch (r.what) {
      case doing::query: {  // answered from inside a wait: the current one is `wait`
        int done = 0;       // a wait that can end now has not stayed
        if (current != nullptr) MPI_Test(current, &done, MPI_STATUS_IGNORE);
        report a;
        a.what = done == 0 && r.members.size() == seen.size() &&
                         r.members[static_cast<std::size_t>(me)] == wait
                     ? doing::still
                     : doing::moved;
        a.index = r.index;
        send(from, a);
        break;
      }
      case doing::still:
      case doing::moved:
        if (query == 0 || r.index != query) break;  // an answer to an abandoned query
        confirmed = confirmed && r.what == doing::still;
        if (--due > 0) break;
        if (confirmed) {
          report v;
          v.what = doing::verdict;
          v.text = message();
          verdict = v.text;
          send_all(v);
          return;
        }
        refuted = asked;
        query = 0;
        break;
      case doing::verdict: verdict = r.text; return;
      default: seen[static_cast<std::size_t>(from)] = std::move(r); break;
    }
  }
}

bool state::can_complete(int r) const {
  const report& mine = seen[static_cast<std::size_t>(r)];
  if (mine.what == doing::unjudged) return true;
  if (mine.what == doing::returned)
    return std::all_of(seen.begin(), seen.end(),
                       [](const report& q) { return q.what == doing::returned; });
  for (std::int64_t m : mine.members) {
    if (m < 0 || m >= p) return true;  // a rank outside the case: not judged
    const report& q = seen[static_cast<std::size_t>(m)];
    const bool with_me =
        q.what == doing::in_call && q.index == mine.index && q.members == mine.members;
    if (!with_me && !past(q, mine.members, mine.index)) return false;
  }
  return true;
}

bool state::stuck() const {
  for (const report& r : seen)
    if (r.what == doing::nothing) return false;
  for (int r = 0; r < p; ++r)
    if (can_complete(r)) return false;
  return true;
}

std::string state::message() const {
  // The ranks others' waits in a call miss, counted per rank; the most missed are out of step.
  std::vector<int> missed(static_cast<std::size_t>(p), 0);
  for (int r = 0; r < p; ++r) {
    const report& mine = seen[static_cast<std::size_t>(r)];
    if (mine.what != doing::in_call) continue;
    for (std::int64_t m : mine.members) {
      const report& q = seen[static_cast<std::size_t>(m)];
      if (q.what != doing::in_call || q.index != mine.index || q.members != mine.members)
        ++missed[static_cast<std::size_t>(m)];
    }
  }
  std::string out = "ranks out of step:";
  std::vector<char> told(static_cast<std::size_t>(p), 0);
  bool first = true;
  for (int r = 0; r < p; ++r) {
    if (told[static_cast<std::size_t>(r)] != 0) continue;
    std::vector<int> same;
    for (int q = r; q < p; ++q)
      if (seen[static_cast<std::size_t>(q)].text == seen[static_cast<std::size_t>(r)].text) {
        told[static_cast<std::size_t>(q)] = 1;
        same.push_back(q);
      }
    // "wait in …" is said of one rank as "waits in …".
    std::string text = seen[static_cast<std::size_t>(r)].text;
    if (same.size() == 1 && text.starts_with("wait in ")) text = "waits" + text.substr(4);
    out += (first ? " " : "; ") + ranks_text(same) + " " + text;
    first = false;
  }
  const int most = *std::max_element(missed.begin(), missed.end());
  std::vector<int> behind;
  for (int r = 0; r < p && most > 0; ++r)
    if (missed[static_cast<std::size_t>(r)] == most) behind.push_back(r);
  if (!behind.empty()) out += "; out of step: " + ranks_text(behind);
  return out;
}

// ---- watch ----------------------------------------------------------------------------------

watch::watch(MPI_Comm reports, std::uint64_t serial) {
  if (reports == MPI_COMM_NULL) return;
  auto s = std::make_unique<state>();
  s->reports = reports;
  s->serial = serial;
  MPI_Comm_rank(reports, &s->me);
  MPI_Comm_size(reports, &s->p);
  s->seen.resize(static_cast<std::size_t>(s->p));
  s->counted = &tally_of(reports, s->p);
  s->names.reserve(8);
  open_watch = s.release();
}

watch::~watch() {
  if (open_watch == nullptr) return;
  open_watch->settle_sends();
  // A report a rank never read (the case ended first) is left to MPI, its bytes with it.
  for (auto& [request, bytes] : open_watch->sends) {
    MPI_Request_free(&request);
    new std::vector<char>(std::move(bytes));  // NOLINT: kept until MPI is done with it
  }
  delete open_watch;
  open_watch = nullptr;
}

void name(MPI_Comm c, std::string label) {
  if (open_watch != nullptr && c != MPI_COMM_NULL)
    open_watch->names.emplace_back(c, std::move(label));
}

void phase(std::string p) {
  if (open_watch == nullptr) return;
  if (p == "forward") {  // a run of the kernel begins: indices restart on every communicator
    open_watch->used.clear();
    open_watch->has_last = false;
  }
  open_watch->phase = std::move(p);
  open_watch->phase_calls = 0;
}

void forget(MPI_Comm c) {
  if (open_watch == nullptr || c == MPI_COMM_NULL) return;
  for (state::comm_info& i : open_watch->used)
    if (i.comm == c) {
      open_watch->know(i);
      i.comm = MPI_COMM_NULL;
    }
  std::erase_if(open_watch->names, [c](const auto& n) { return n.first == c; });
}

bool keeps_communicators() { return open_watch != nullptr && open_watch->abandoned; }

bool case_abandoned() { return open_watch != nullptr && open_watch->abandoned; }
bool watching() { return open_watch != nullptr; }

void completed(const call_record& c) {
  calls_done.fetch_add(1, std::memory_order_relaxed);
  last_call_at.store(now_ns(), std::memory_order_relaxed);
  if (open_watch == nullptr) return;
  state::comm_info& i = open_watch->info(c.comm);
  ++i.done;
  open_watch->last = c;
  open_watch->last_used = static_cast<std::size_t>(&i - open_watch->used.data());
  open_watch->has_last = true;
  ++open_watch->phase_calls;
}

namespace {
// Tests r until done; past report_after, reports `mine` (its text and members filled in then by
// `describe`) and judges the reports of every rank.
template <class Describe>
void watched(MPI_Request& r, MPI_Comm comm, Describe describe) {
  state* s = open_watch;
  if (s == nullptr) {
    check_mpi(MPI_Wait(&r, MPI_STATUS_IGNORE), "wait");
    return;
  }
  const std::int64_t start = now_ns();
  waiting_since.store(start, std::memory_order_relaxed);
  bool reported = false;
  ++s->wait;
  s->current = &r;
  while (true) {
    int done = 0;
    check_mpi(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "wait");
    if (done != 0) break;
    const std::int64_t t = now_ns();
    if (t - start < report_after_ns) continue;
    if (!reported) {
      report mine = describe(*s);
      mine.wait = s->wait;
      mine.progress = s->progress();
      {
        std::lock_guard lock(waiting_mutex);
        waiting_text = mine.text;
      }
      s->send_all(mine);
      reported = true;
    }
    s->receive();
    if (s->verdict.empty()) s->judge();
    s->settle_sends();
    if (!s->verdict.empty()) {
      s->abandoned = true;
      s->current = nullptr;
      abandon(comm);
      waiting_since.store(0, std::memory_order_relaxed);
      throw out_of_step(s->verdict);
    }
  }
  waiting_since.store(0, std::memory_order_relaxed);
  s->query = 0;  // its snapshot named this wait: answers to it say nothing now
  s->current = nullptr;
  if (reported) {
    {
      std::lock_guard lock(waiting_mutex);
      waiting_text.clear();
    }
    report gone;  // withdrawn
    gone.wait = s->wait;
    s->send_all(gone);
  }
}
}  // namespace

void wait_in_call(MPI_Request& r, const call_record& what) {
  watched(r, what.comm, [&](state& s) {
    report mine;
    mine.what = doing::in_call;
    mine.index = what.index;
    state::comm_info& on = s.info(what.comm);
    s.know(on);
    mine.members = on.members;
    if (std::find(mine.members.begin(), mine.members.end(), -1) != mine.members.end())
      mine.what = doing::unjudged;
    mine.text = "wait in " + s.call_text(what, on) + " in " + s.phase + " after " +
                calls_text(s.phase_calls);
    return mine;
  });
}

void wait_returned(MPI_Request& r, MPI_Comm comm, const std::string& note) {
  watched(r, comm, [&](state& s) {
    report mine;
    mine.what = doing::returned;
    // The exception's first line, at most 160 bytes, without the property verify prefixes.
    std::string why = note.starts_with("runs: ") ? note.substr(6) : note;
    why = why.substr(0, std::min(why.find('\n'), std::size_t{160}));
    mine.text = (note.empty() ? "returned from " + s.phase
                              : "left " + s.phase + " by an exception (" + why + ")") +
                " after " + calls_text(s.phase_calls);
    if (s.has_last)
      mine.text += " there, its last call " + s.call_text(s.last, s.used[s.last_used]);
    return mine;
  });
}

void drain(MPI_Comm reports) {
  int p = 1;
  MPI_Comm_size(reports, &p);
  tally& t = tally_of(reports, p);
  std::vector<long long> due(static_cast<std::size_t>(p), 0);
  check_mpi(MPI_Alltoall(t.sent.data(), 1, MPI_LONG_LONG, due.data(), 1, MPI_LONG_LONG, reports),
            "flight recorder");
  for (int q = 0; q < p; ++q)
    for (auto& got = t.received[static_cast<std::size_t>(q)];
         got < due[static_cast<std::size_t>(q)]; ++got) {
      MPI_Status st;
      check_mpi(MPI_Probe(q, report_tag, reports, &st), "flight recorder");
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      std::vector<char> bytes(static_cast<std::size_t>(std::max(n, 0)));
      check_mpi(MPI_Recv(bytes.data(), n, MPI_BYTE, q, report_tag, reports, MPI_STATUS_IGNORE),
                "flight recorder");
    }
  std::fill(t.sent.begin(), t.sent.end(), 0);
  std::fill(t.received.begin(), t.received.end(), 0);
}

void abandon(MPI_Comm c) {
  if (c != MPI_COMM_NULL && !abandoned(c)) abandoned_list().push_back(c);
}

bool abandoned(MPI_Comm c) {
  const auto& list = abandoned_list();
  return c != MPI_COMM_NULL && std::find(list.begin(), list.end(), c) != list.end();
}

progress progress_now() {
  progress out;
  out.calls = calls_done.load(std::memory_order_relaxed);
  out.last_call_ns = last_call_at.load(std::memory_order_relaxed);
  out.waiting_since_ns = waiting_since.load(std::memory_order_relaxed);
  std::lock_guard lock(waiting_mutex);
  out.waiting_in = waiting_text;
  return out;
}

}  // namespace shardcheck::par::flight
