#include "plotting.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "runner.hpp"

namespace shardcheck::cli_tools {

namespace {

// The terminal the bar is drawn on: this rank's stderr if it is one, else, under a local mpirun
// (which hands its ranks pipes, never its terminal), mpirun's own stderr when that is a
// terminal. -1: none (stderr redirected, CI), and no bar.
int terminal_fd() {
  if (isatty(STDERR_FILENO) != 0) return STDERR_FILENO;
  const std::string parent = "/proc/" + std::to_string(getppid());
  std::ifstream comm_file(parent + "/comm");
  std::string name;
  std::getline(comm_file, name);
  if (name != "mpirun" && name != "mpiexec" && name != "orterun" && name != "prterun") return -1;
  const int fd = open((parent + "/fd/2").c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0 && isatty(fd) != 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

}  // namespace

progress::progress(bool on, int total) : fd_(on ? terminal_fd() : -1), total_(total) {
  runner::begin_steps(total);
}

progress::~progress() {
  if (fd_ > STDERR_FILENO) close(fd_);
}

void progress::step(const std::string& what) {
  ++done_;
  runner::step(what);
  if (fd_ < 0) return;
  constexpr int width = 30;
  const int filled = total_ > 0 ? width * std::min(done_, total_) / total_ : width;
  draw("\r[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " +
       std::to_string(done_) + "/" + std::to_string(total_) + " " + what + "\033[K");
}

void progress::finish() {
  if (fd_ >= 0) draw("\r\033[K");
}

void progress::draw(const std::string& text) const {
  if (write(fd_, text.data(), text.size()) < 0) return;  // a closed terminal: no bar
}

bool gnuplot_available() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

bool run_gnuplot(const std::filesystem::path& dir, const std::string& name,
                 const std::string& script) {
  {
    std::ofstream gp(dir / name);
    gp << script;
    if (!gp) return false;
  }
  const std::string cmd = "cd '" + dir.string() + "' && gnuplot '" + name + "' 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace shardcheck::cli_tools
