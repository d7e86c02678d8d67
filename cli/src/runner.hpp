#pragma once
// One way of running a command. Every subcommand of `shardcheck` (list, explain, verify,
// selftest, shrink, compare, audit, scale) is a file of its own that adds its options and says what
// it does; what every command promises lives here, once:
//   - validation: bad input is a shardcheck::error, found alike on every rank: exit 2 with one
//     message, from rank 0; every message has its control characters escaped (escape());
//   - a rank that crashes exits 5 and says what it was doing (last_words, doing()); SIGINT and
//     SIGTERM print what finished and leave the command's result files valid, "complete": false
//     (step());
//   - files are written whole or not at all (write_file: a temporary name in the same directory,
//     then rename); a file that cannot be written is exit 2, never a "wrote" over nothing;
//   - a run that judged nothing is exit 2 with the reason (nothing_checked()).
//
//   runner::command c{app.add_subcommand("list", "…"), /*mpi=*/false, [] { return 0; }};
//   return runner::run(app, argc, argv, {c, …});
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/reference/types.hpp"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace shardcheck::runner {

// Bad usage (exit 2): an option, a case line, a file, a limit.
struct usage_error : error {
  using error::error;
};

// s with every control character (C0, DEL, C1) and every byte that is not UTF-8 written as
// \xNN; printable UTF-8 ("…", "·") is kept: escape("a\x1b[31mb") == "a\\x1b[31mb".
[[nodiscard]] std::string escape(std::string_view s);

// CLI11 checks shared by the commands' options.
// 0 … 2⁶⁴−1 written in digits ("-1" would otherwise wrap to 2⁶⁴−1).
[[nodiscard]] const CLI::Validator& unsigned_integer();
// A finite number above 0 that a double holds (1e-400, which reads as 0, is refused).
[[nodiscard]] const CLI::Validator& positive_number();
// No whole number, alone or in a comma list, past what 64 bits hold (CLI11 would read it as the
// nearest 64-bit value).
[[nodiscard]] const CLI::Validator& within_64_bits();
// Any value but the empty one (`--p ''` would otherwise read as the default).
[[nodiscard]] const CLI::Validator& not_empty();
// A replay line no longer than a corpus line may be (corpus::check_length), refused before MPI
// starts.
[[nodiscard]] const CLI::Validator& replay_line_length();

// --memory-limit, the same for every command that runs cases: the bytes a case's footprint on a
// rank may take (prop::footprint_of), e.g. 2GiB, 512M, 1000000; a case above it is refused before
// it runs. add_memory_limit adds the option to `c` (into `text`); memory_limit(text) is the limit,
// or with `text` empty the default: 3/4 of the machine's memory shared by the ranks on it
// (prop::default_memory_limit_here, collective over MPI_COMM_WORLD). A bad value is exit 2.
void add_memory_limit(CLI::App* c, std::string& text);
[[nodiscard]] std::int64_t memory_limit(const std::string& text);

// Writes `text` to `path` whole or not at all (a temporary name beside it, then rename; a path
// that is no regular file, /dev/null, is written in place). Throws usage_error naming the path
// and the reason, e.g. "cannot write out/audit.json: No space left on device".
void write_file(const std::string& path, std::string_view text);

// --out DIR of a command: created if needed, and a file written and removed in it, on rank 0;
// every rank throws usage_error alike when that failed. \note collective over MPI_COMM_WORLD.
void prepare_out_dir(const std::string& option, const std::string& dir);

// What a command that runs no case of the driver has finished so far, and where its results
// go: on a crash the rank says the last step; on SIGINT or SIGTERM the leader prints the steps
// finished and writes {"command": …, "complete": false, "steps_total": …, "steps_finished": […]}
// to each partial file.
void begin_steps(int total);
void step(const std::string& what);
// A result file (rank 0) that an interrupt leaves valid and marked "complete": false.
void partial_file(const std::string& path);
// The command wrote its final files: the partial files are its own from now on.
void results_final();

// Throws usage_error "nothing was checked: <why>" (exit 2): a run that judged nothing is not a
// pass.
[[noreturn]] void nothing_checked(const std::string& why);

// The name of the command running ("verify", "compare", …).
[[nodiscard]] const std::string& command_name();

struct command {
  CLI::App* app = nullptr;          // the subcommand, its options added
  std::function<bool()> needs_mpi;  // whether it runs under MPI (after parsing)
  std::function<int()> run;         // its exit code; throws on bad input or failure
};

// Parses argv, starts MPI for the command that needs it, runs it and turns every way it can end
// into its exit code (properties/exit_codes.hpp): a usage error 2 (rank 0 says it), an MPI or
// runtime error 4 (the job ends: MPI_Abort), out of memory 4.
// `hooks` (the extra kernels' registry's): init once per process after MPI is up, for a command
// that needs MPI; finalize before MPI is finalised.
int run(CLI::App& app, int argc, char** argv, const std::vector<command>& commands,
        const par::process_hooks& hooks = {});

}  // namespace shardcheck::runner
