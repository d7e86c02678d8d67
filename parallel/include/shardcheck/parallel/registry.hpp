#pragma once
// The kernels shardcheck knows. Adding one: its file under parallel/strategies/ and one line in
// registry.cpp.
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

// Per-process set-up of a library the kernels call (PetscInitialize, GA_Initialize), run by
// cli_main on every launched rank, for the commands that run kernels under MPI (verify,
// selftest, compare, audit, scale, explain --record): `init` once, after MPI is initialised and
// before the command, with the command line (MPI initialised by shardcheck, or before cli_main by
// the program or the library itself: both work, and MPI_COMM_WORLD returns errors either way);
// `finalize` once, after the command, before shardcheck finalises MPI. An exception from `init`
// ends the run as a runtime error (exit 4). Either may be empty.
struct process_hooks {
  std::function<void(int& argc, char**& argv)> init;
  std::function<void()> finalize;
};

class registry {
 public:
  // Throws if a kernel of the same name is registered already.
  void add(std::unique_ptr<kernel> k);
  // nullptr if absent.
  [[nodiscard]] const kernel* find(std::string_view name) const;
  [[nodiscard]] const std::vector<std::unique_ptr<kernel>>& all() const { return items_; }
  // The set-up its kernels' library needs in every process (process_hooks).
  void set_process_hooks(process_hooks h) { hooks_ = std::move(h); }
  [[nodiscard]] const process_hooks& hooks() const { return hooks_; }

 private:
  std::vector<std::unique_ptr<kernel>> items_;
  process_hooks hooks_;
};

// The built-in kernels.
[[nodiscard]] registry builtin_strategies();

}  // namespace shardcheck::par
