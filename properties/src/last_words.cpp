#include "shardcheck/properties/last_words.hpp"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "shardcheck/parallel/pmpi.hpp"
#include "shardcheck/properties/exit_codes.hpp"

namespace shardcheck::prop::last_words {

namespace {

// The replay line for the crash handler, in memory set aside before any case: a handler may not
// allocate. Replay lines are at most 128 KiB (corpus.hpp); the command around one adds a little.
constexpr std::size_t line_capacity = (128 << 10) + 4096;
char line_buffer[line_capacity];
std::atomic<std::size_t> line_length{0};
// The command that shrinks the case in fresh jobs (shrink_command), printed after the replay line.
char shrink_buffer[line_capacity];
std::atomic<std::size_t> shrink_length{0};
// What a command outside any case is doing (doing()), for the crash handler.
constexpr std::size_t doing_capacity = 4096;
char doing_buffer[doing_capacity];
std::atomic<std::size_t> doing_length{0};
char rank_text[16] = "?";
std::size_t rank_length = 1;
alignas(16) char alternate_stack[64 << 10];  // a stack overflow still reaches the handler

// The interrupt path: the handler only writes the signal number into a pipe; a thread of our own
// reads it and, free of the handler's limits, prints and exits.
int wake_pipe[2] = {-1, -1};
bool speaks = false;
std::mutex state;
std::string finished_text;
std::string running_line;
std::string doing_text;
std::function<void()> save_partial;
std::atomic<int> complete_code{-1};  // ≥ 0 once the command is done (lock-free: signal-safe)
std::function<void(const std::string&, const std::string&)> abort_writer;

void say(const char* s, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}
void say(const char* s) { say(s, std::strlen(s)); }

const char* name_of(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

// The crash message, put together before it is written: one write(), so that ranks crashing at
// once (each its own process on one pipe) do not interleave their lines.
char message_buffer[2 * line_capacity + doing_capacity + 256];

extern "C" void on_crash(int sig) {
  std::size_t used = 0;
  const auto put = [&](const char* s, std::size_t k) {
    k = std::min(k, sizeof message_buffer - used);
    std::memcpy(message_buffer + used, s, k);
    used += k;
  };
  const auto put_text = [&](const char* s) { put(s, std::strlen(s)); };
  put_text("shardcheck: rank ");
  put(rank_text, rank_length);
  put_text(" crashed (");
  put_text(name_of(sig));
  const std::size_t n = line_length.load();
  const std::size_t d = doing_length.load();
  if (n == 0 && d > 0) {
    put_text(") while ");
    put(doing_buffer, d);
    put_text("\n");
  } else if (n == 0) {
    put_text(") outside any case\n");
  } else {
    put_text(") while running a case\nreplay: ");
    put(line_buffer, n);
    put_text("\n");
    if (const std::size_t m = shrink_length.load(); m > 0) {
      put_text("shrink: ");
      put(shrink_buffer, m);
      put_text("\n");
    }
  }
  say(message_buffer, used);
  // The stack, for the report of a crash outside any case (or inside shardcheck's own code):
  // backtrace_symbols_fd writes without allocating; backtrace() was called once at install, so
  // its unwinder is loaded already.
  void* frames[48];
  const int depth = ::backtrace(frames, 48);
  say("shardcheck: the crashed rank's stack (addr2line -e <binary> resolves the offsets):\n");
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  ::_exit(exit_code::crashed);
}

// A kernel's MPI_Abort (pmpi.hpp): not a signal, so it may print and write files freely.
void on_mpi_abort(MPI_Comm, int code) {
  std::fflush(stdout);
  const std::size_t n = line_length.load();
  const std::string what = "rank " + std::string(rank_text, rank_length) +
                           " called MPI_Abort (error code " + std::to_string(code) + ")";
  std::string text = "shardcheck: " + what;
  if (n == 0)
    text += " outside any case\n";
  else
    text += " while running a case\nreplay: " + std::string(line_buffer, n) + "\n";
  if (const std::size_t m = shrink_length.load(); n > 0 && m > 0)
    text += "shrink: " + std::string(shrink_buffer, m) + "\n";
  say(text.data(), text.size());
  if (abort_writer) {
    try {
      abort_writer(what, std::string(line_buffer, n));
    } catch (const std::exception& e) {
      const std::string why = std::string("shardcheck: ") + e.what() + "\n";
      say(why.data(), why.size());
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  PMPI_Abort(MPI_COMM_WORLD, exit_code::aborted);
  ::_exit(exit_code::aborted);
}

extern "C" void on_interrupt(int sig) {
  if (const int code = complete_code.load(); code >= 0) ::_exit(code);
  if (!speaks) ::_exit(128 + sig);
  const unsigned char s = static_cast<unsigned char>(sig);
  if (::write(wake_pipe[1], &s, 1) != 1) ::_exit(128 + sig);
}

void speak_and_exit() {
  unsigned char sig = 0;
  while (::read(wake_pipe[0], &sig, 1) != 1) {
  }
  std::lock_guard lock(state);
  if (save_partial) {
    try {
      save_partial();
    } catch (...) {  // an unwritable partial file: the interrupt still ends the run
    }
  }
  std::fflush(stdout);
  std::fprintf(stdout, "%s", finished_text.c_str());
  std::fprintf(stdout, "shardcheck: interrupted (%s)", name_of(sig));
  if (running_line.empty() && !doing_text.empty())
    std::fprintf(stdout, " while %s\n", doing_text.c_str());
  else if (running_line.empty())
    std::fprintf(stdout, " between cases\n");
  else
    std::fprintf(stdout, " while running a case\nreplay: %s\n", running_line.c_str());
  std::fflush(stdout);
  ::_exit(128 + sig);
}

void handle(int sig, void (*fn)(int), int flags) {
  struct sigaction sa {};
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  sigaction(sig, &sa, nullptr);
}

}  // namespace

void install(int rank, bool leader) {
  static std::once_flag once;
  std::call_once(once, [&] {
    rank_length = static_cast<std::size_t>(std::snprintf(rank_text, sizeof rank_text, "%d", rank));
    void* warm[1];
    (void)::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the crash handler
    stack_t ss{};
    ss.ss_sp = alternate_stack;
    ss.ss_size = sizeof alternate_stack;
    sigaltstack(&ss, nullptr);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGABRT})
      handle(sig, on_crash, SA_ONSTACK | SA_RESETHAND);
    speaks = leader;
    if (leader && ::pipe(wake_pipe) != 0) speaks = false;
    if (speaks) std::thread(speak_and_exit).detach();
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) handle(sig, on_interrupt, SA_RESTART);
    par::pmpi::on_abort = on_mpi_abort;
  });
}

void running(const std::string& replay, const std::string& shrink) {
  line_length.store(0);
  shrink_length.store(0);
  const std::size_t n = std::min(replay.size(), line_capacity);
  std::memcpy(line_buffer, replay.data(), n);
  line_length.store(n);
  const std::size_t m = std::min(shrink.size(), line_capacity);
  std::memcpy(shrink_buffer, shrink.data(), m);
  shrink_length.store(m);
  if (speaks) {
    std::lock_guard lock(state);
    running_line = replay;
  }
}

void idle() {
  line_length.store(0);
  shrink_length.store(0);
  if (speaks) {
    std::lock_guard lock(state);
    running_line.clear();
  }
}

void finished(std::string text) {
  std::lock_guard lock(state);
  finished_text = std::move(text);
}

void on_abort(std::function<void(const std::string& what, const std::string& replay)> write) {
  abort_writer = std::move(write);
}

void doing(const std::string& what) {
  doing_length.store(0);
  const std::size_t n = std::min(what.size(), doing_capacity);
  std::memcpy(doing_buffer, what.data(), n);
  doing_length.store(n);
  if (speaks) {
    std::lock_guard lock(state);
    doing_text = what;
  }
}

void on_interrupt(std::function<void()> save) {
  std::lock_guard lock(state);
  save_partial = std::move(save);
}

void complete(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  complete_code.store(code);
}

}  // namespace shardcheck::prop::last_words
