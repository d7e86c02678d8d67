// shardcheck shrink: a case that ends its job (a rank crashes, calls MPI_Abort, hangs to the
// watchdog or is killed) cannot be shrunk inside the job it ended. Here each candidate runs in a
// fresh job of its own, the launch command given after `--` followed by this program's
// `verify --replay CANDIDATE`, and is kept when that job ends with the same exit code:
//
//   shardcheck shrink --replay 'strategy=crash_segv p=4 M=3 N=64 K=40 …' -- mpirun -n 4
//   --oversubscribe
//
// The candidates are verify's final shrinking pass's (shrink.hpp): fewer workers, a smaller
// dimension, a simpler mode, backend, parameter, partition and seed, one at a time, to a local
// minimum or the budget.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "../corpus.hpp"
#include "commands.hpp"
#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/exit_codes.hpp"
#include "shardcheck/properties/shrink.hpp"

namespace shardcheck::commands {

namespace {

namespace code = prop::exit_code;

struct shrink_options {
  std::string replay;
  std::vector<std::string> launch;  // after `--`
  std::string properties = "all";
  double case_timeout = prop::default_case_timeout;
  double candidate_timeout = 0;  // 0: case_timeout + 60
  int max_runs = 200;
  double max_seconds = 1800;
  bool quiet = false;
};

// The job running now (its process group), for an interrupt to end; and the smallest case's
// replay line so far, for it to print (both set outside the handler, read inside).
std::atomic<pid_t> running_group{0};
constexpr std::size_t best_capacity = (128 << 10) + 4096;
char best_line[best_capacity];
std::atomic<std::size_t> best_length{0};

void say(const char* s, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDOUT_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void shrink_interrupted(int sig) {
  if (const pid_t g = running_group.load(); g > 0) ::kill(-g, SIGKILL);
  const char head[] =
      "shardcheck shrink: interrupted; the smallest case that ends its job so far:\n";
  if (const std::size_t n = best_length.load(); n > 0) {
    say(head, sizeof head - 1);
    say(best_line, n);
    say("\n", 1);
  }
  ::_exit(128 + sig);
}

void remember(const std::string& line) {
  best_length.store(0);
  const std::size_t n = std::min(line.size(), best_capacity);
  std::memcpy(best_line, line.data(), n);
  best_length.store(n);
}

// What an exit code says, for the messages.
std::string meaning(int c) {
  switch (c) {
    case code::pass: return "every property held";
    case code::failed: return "a property failed";
    case code::usage: return "bad usage";
    case code::watchdog: return "the watchdog ended a hung case";
    case code::runtime: return "an MPI or runtime error";
    case code::crashed: return "a rank crashed";
    case code::aborted: return "MPI_Abort";
    case code::killed: return "a rank was killed";
    default: return "exit " + std::to_string(c);
  }
}

bool ends_the_job(int c) {
  return c == code::crashed || c == code::aborted || c == code::watchdog || c == code::killed;
}

// This program's own path, for the jobs it launches (argv[0] may be relative to another
// directory, or a name found on PATH).
std::string self_path(const std::string& program) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? program : p.string();
}

struct outcome {
  int code = 0;
  bool timed_out = false;
  std::string first_line;  // the job's first line starting "shardcheck: " (what ended it)
};

// Runs argv in a process group of its own, its output into a temporary file; past `seconds` the
// group is killed (SIGTERM, then SIGKILL 5 s later).
outcome launch(const std::vector<std::string>& argv, double seconds) {
  char path[] = "/tmp/shardcheck_shrink.XXXXXX";
  const int out_fd = ::mkstemp(path);
  if (out_fd < 0)
    throw error(std::string("cannot create a temporary file: ") + std::strerror(errno));
  ::unlink(path);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out_fd);
    throw error(std::string("cannot start a job: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(out_fd, STDERR_FILENO);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "shardcheck shrink: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  running_group.store(pid);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  outcome out;
  int status = 0;
  bool termed = false;
  while (true) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw error(std::string("waitpid: ") + std::strerror(errno));
    const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    if (!termed && elapsed > seconds) {
      out.timed_out = true;
      termed = true;
      ::kill(-pid, SIGTERM);
    } else if (termed && elapsed > seconds + 5) {
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(-pid, SIGKILL);  // whatever the job left behind in its group
  running_group.store(0);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::string text;
  char buf[4096];
  ::lseek(out_fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(out_fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(out_fd);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("shardcheck: ") || line.starts_with("shardcheck shrink: ")) {
      out.first_line = runner::escape(line);
      break;
    }
  return out;
}

int do_shrink(const catalogue& cat, const shrink_options& o, const std::string& program) {
  check_case_timeout(o.case_timeout);
  const unsigned mask = prop::parse_properties(o.properties);
  par::run_case c = par::run_case::parse(o.replay);
  const par::kernel& k = cat.need(c.strategy);
  par::complete_and_validate(k, c);
  if (o.launch.empty() && c.p > 1)
    throw usage_error("the case needs p=" + std::to_string(c.p) +
                      " workers: give the launch command after --, e.g. -- " +
                      prop::launch_command(c.p));
  const double limit = o.candidate_timeout > 0 ? o.candidate_timeout : o.case_timeout + 60;
  const std::string self = self_path(program);

  // The job of one case: the launch command, then `verify` replaying it with the options that
  // decide its verdict, never re-running it (a job that ends is not run again).
  const auto job = [&](const par::run_case& d) {
    std::vector<std::string> argv = o.launch;
    argv.insert(argv.end(), {self, "verify", "--quiet", "--reruns", "0"});
    if ((mask | static_cast<unsigned>(prop::property::runs)) != prop::all_properties)
      argv.insert(argv.end(), {"--property", prop::properties_to_string(mask)});
    std::ostringstream t;
    t << o.case_timeout;
    argv.insert(argv.end(), {"--case-timeout", t.str(), "--replay", d.to_string()});
    return launch(argv, limit);
  };

  struct sigaction sa {};
  sa.sa_handler = shrink_interrupted;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);

  std::printf("shardcheck shrink: %s\n", c.to_string().c_str());
  const outcome first = job(c);
  if (first.code == 127 && first.first_line.starts_with("shardcheck shrink: cannot run "))
    throw usage_error(first.first_line.substr(std::strlen("shardcheck shrink: ")) +
                      " (the launch command after --)");
  if (first.timed_out || !ends_the_job(first.code))
    runner::nothing_checked(
        "the case does not end its job under the launch command: it " +
        (first.timed_out
             ? "ran past the limit of " + std::to_string(limit) + " s"
             : "exited " + std::to_string(first.code) + " (" + meaning(first.code) + ")") +
        "; shrink takes a case whose job ends with exit 3 (the watchdog), 5 (a crash), 6 "
        "(MPI_Abort) or 137 (a killed rank); a property failure is shrunk by verify itself");
  const int target = first.code;
  std::printf("  exit %d (%s)%s%s\n", target, meaning(target).c_str(),
              first.first_line.empty() ? "" : ": ", first.first_line.c_str());
  remember(c.to_string());

  std::string last_words = first.first_line;
  int run = 0;
  // A candidate met again from a later case (p=1 tried from p=4, then from p=3) is judged once.
  std::map<std::string, bool> judged;
  const prop::local_minimum m = prop::shrink_to_local_minimum(
      c, k, {}, {o.max_runs, o.max_seconds}, [&](const par::run_case& d) {
        if (const auto it = judged.find(d.to_string()); it != judged.end()) return it->second;
        const outcome r = job(d);
        ++run;
        const bool kept = !r.timed_out && r.code == target;
        if (!o.quiet)
          std::printf("  %3d %s %s\n", run,
                      r.timed_out ? "timed out" : ("exit " + std::to_string(r.code)).c_str(),
                      (kept ? "kept: " + d.to_string() : d.to_string()).c_str());
        std::fflush(stdout);
        if (kept) {
          remember(d.to_string());
          last_words = r.first_line;
        }
        judged.emplace(d.to_string(), kept);
        return kept;
      });
  std::printf("smallest case whose job ends with exit %d (%s), after %d jobs (%s):\n", target,
              meaning(target).c_str(), run + 1,
              m.reached ? "a local minimum: no one simplification of it does"
                        : "the budget ran out first: --max-runs, --max-seconds");
  if (!last_words.empty()) std::printf("  %s\n", last_words.c_str());
  std::printf("case: %s\nreplay: %s\n", m.c.to_string().c_str(),
              prop::replay_command(program, m.c, mask, o.case_timeout).c_str());
  return code::pass;
}

}  // namespace

runner::command shrink(CLI::App& app, const catalogue& cat, const std::string& program) {
  auto o = std::make_shared<shrink_options>();
  auto* cmd = app.add_subcommand(
      "shrink",
      "Shrink a case whose job ends (a crash, MPI_Abort, the watchdog) in fresh jobs, one per "
      "candidate: shrink --replay LINE -- <launch command, e.g. mpirun -n 4 --oversubscribe>");
  cmd->add_option("--replay", o->replay, "The case line to shrink (verify's replay line's case)")
      ->required()
      ->check(runner::replay_line_length());
  cmd->add_option("--property", o->properties,
                  "Properties each candidate's verify checks (as verify --property)")
      ->capture_default_str();
  cmd->add_option("--case-timeout", o->case_timeout,
                  "Seconds before a candidate's watchdog ends its case (as verify's)")
      ->capture_default_str();
  cmd->add_option("--candidate-timeout", o->candidate_timeout,
                  "Seconds before a candidate's job is killed and counted as not ending so "
                  "(default: --case-timeout + 60)")
      ->check(runner::positive_number());
  cmd->add_option("--max-runs", o->max_runs, "At most this many candidates tried")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-seconds", o->max_seconds, "No candidate launched after this many seconds")
      ->capture_default_str()
      ->check(runner::positive_number());
  cmd->add_flag("--quiet", o->quiet, "No line per candidate");
  cmd->add_option("launch", o->launch,
                  "After --: the command that launches a job (mpirun -n 4 --oversubscribe); "
                  "none: this program runs alone, one rank");
  cmd->positionals_at_end();
  return {cmd, [] { return false; }, [o, &cat, program] { return do_shrink(cat, *o, program); }};
}

}  // namespace shardcheck::commands
