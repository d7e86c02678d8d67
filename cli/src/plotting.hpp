#pragma once
// What compare and audit share for long runs and their figures: the progress bar (rank 0, a
// terminal only) and gnuplot, driven through a script written beside its outputs.
#include <filesystem>
#include <string>

namespace shardcheck::cli_tools {

// One line, redrawn on the terminal (never into a pipe or a CI log):
// "[#########.....................] 12/58 summa rep 2". on = false (other ranks, --quiet): none.
class progress {
 public:
  progress(bool on, int total);
  ~progress();
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;
  void step(const std::string& what);
  void finish();

 private:
  void draw(const std::string& text) const;
  int fd_;
  int total_, done_ = 0;
};

// Whether gnuplot is on the PATH.
[[nodiscard]] bool gnuplot_available();
// Writes `script` to dir/name and runs gnuplot on it inside dir (its `set output` names are
// relative to dir). True when gnuplot exited 0.
[[nodiscard]] bool run_gnuplot(const std::filesystem::path& dir, const std::string& name,
                               const std::string& script);

}  // namespace shardcheck::cli_tools
