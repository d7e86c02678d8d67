#include "runner.hpp"

#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "corpus.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/properties/exit_codes.hpp"
#include "shardcheck/properties/footprint.hpp"
#include "shardcheck/properties/last_words.hpp"

namespace shardcheck::runner {

namespace {

std::string hex(unsigned char b) {
  char out[8];
  std::snprintf(out, sizeof out, "\\x%02x", b);
  return out;
}

// The length of the UTF-8 sequence at s[i] that encodes a printable code point (none of C1,
// U+0080 … U+009F), or 0.
std::size_t printable_utf8(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char lead = b(i);
  std::size_t n = 0;
  char32_t cp = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
    cp = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    cp = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    cp = lead & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t j = 1; j < n; ++j) {
    if ((b(i + j) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + j) & 0x3f);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  if (cp >= 0x80 && cp <= 0x9f) return 0;
  return n;
}

std::string name_;

// The steps of a command that runs no case (step()), and its partial result files.
struct steps_state {
  std::mutex lock;
  int total = 0;
  std::vector<std::string> done;
  std::vector<std::string> files;
  bool final = false;
};
steps_state& steps() {
  static steps_state s;
  return s;
}

// {"command", "complete": false, "steps_total", "steps_finished"} into each partial file. Called
// on the leader's interrupt thread.
void write_partial(const steps_state& s, const std::vector<std::string>& files) {
  const nlohmann::ordered_json doc = {{"command", name_},
                                      {"complete", false},
                                      {"steps_total", s.total},
                                      {"steps_finished", s.done}};
  for (const std::string& f : files) write_file(f, doc.dump(2) + "\n");
}

void save_partial() {
  steps_state& s = steps();
  std::lock_guard guard(s.lock);
  if (!s.final) write_partial(s, s.files);
}

// "compare: 3 of 20 steps finished (the last: summa checked)"
std::string progress_text(const steps_state& s) {
  std::string out = name_ + ": " + std::to_string(s.done.size()) + " of " +
                    std::to_string(s.total) + " steps finished";
  if (!s.done.empty()) out += " (the last: " + s.done.back() + ")";
  return out;
}

bool follower_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(var); r != nullptr && std::string(r) != "0") return true;
  return false;
}

}  // namespace

std::string escape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7f) {
      out += s[i++];
    } else if (const std::size_t n = b >= 0x80 ? printable_utf8(s, i) : 0; n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += hex(b);
      ++i;
    }
  }
  return out;
}

const CLI::Validator& unsigned_integer() {
  static const CLI::Validator v(
      [](const std::string& text) {
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        return text.empty() || ec != std::errc() || end != text.data() + text.size()
                   ? std::string("must be an integer from 0 to 18446744073709551615")
                   : std::string();
      },
      "UINT");
  return v;
}

const CLI::Validator& positive_number() {
  static const CLI::Validator v(
      [](const std::string& text) {
        errno = 0;
        char* end = nullptr;
        const double d = std::strtod(text.c_str(), &end);
        const bool whole = !text.empty() && end == text.c_str() + text.size();
        return whole && errno != ERANGE && std::isfinite(d) && d > 0
                   ? std::string()
                   : std::string("must be a positive number (finite, above 0, e.g. 2.5e-6)");
      },
      "POSITIVE");
  return v;
}

const CLI::Validator& within_64_bits() {
  static const CLI::Validator v(
      [](const std::string& text) {
        // Each item of a list (`--p 2,99999999999999999999`) that is a whole number in digits.
        std::size_t begin = 0;
        while (begin <= text.size()) {
          const std::size_t end = std::min(text.find(',', begin), text.size());
          const std::string_view item(text.data() + begin, end - begin);
          const std::string_view digits = item.substr(!item.empty() && item[0] == '-' ? 1 : 0);
          if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
            std::int64_t s = 0;
            std::uint64_t u = 0;
            const char* last = item.data() + item.size();
            const bool fits =
                std::from_chars(item.data(), last, s).ec == std::errc() ||
                (item[0] != '-' && std::from_chars(item.data(), last, u).ec == std::errc());
            if (!fits)
              return "'" + std::string(item) + "' is past 64 bits (from -9223372036854775808 to " +
                     "18446744073709551615)";
          }
          begin = end + 1;
        }
        return std::string();
      },
      "");
  return v;
}

const CLI::Validator& not_empty() {
  static const CLI::Validator v(
      [](const std::string& text) { return text.empty() ? std::string("must not be empty") : ""; },
      "TEXT");
  return v;
}

const CLI::Validator& replay_line_length() {
  static const CLI::Validator v(
      [](std::string& line) {
        try {
          corpus::check_length(line, "--replay");
        } catch (const error& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "", "replay line length");
  return v;
}

void add_memory_limit(CLI::App* c, std::string& text) {
  c->add_option("--memory-limit", text,
                "Refuse a case whose footprint on a rank is above this many bytes, e.g. 2GiB, "
                "512M, 1000000 (default: 3/4 of the machine's memory shared by the ranks on it)");
}

std::int64_t memory_limit(const std::string& text) {
  return text.empty() ? prop::default_memory_limit_here()
                      : prop::parse_bytes(text, "--memory-limit");
}

void write_file(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A symlink is followed: its target file is replaced, the link stays. Anything but a regular
  // file (/dev/null, a FIFO) is written in place: renaming over it would replace the device.
  fs::path target(path);
  if (fs::is_symlink(fs::symlink_status(target, ec))) target = fs::weakly_canonical(target, ec);
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw usage_error("cannot write " + path + ": it is a directory");
  const bool in_place = fs::exists(st) && !fs::is_regular_file(st);
  fs::path tmp = target;
  if (!in_place) tmp += ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw usage_error("cannot write " + path + ": " + std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int e = errno;
  const bool flushed = std::fflush(f) == 0;
  if (wrote && !flushed) e = errno;
  const bool closed = std::fclose(f) == 0;
  if (wrote && flushed && !closed) e = errno;
  if (!wrote || !flushed || !closed) {
    if (!in_place) std::remove(tmp.c_str());
    throw usage_error("cannot write " + path + ": " + std::strerror(e));
  }
  if (in_place) return;
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int r = errno;
    std::remove(tmp.c_str());
    throw usage_error("cannot write " + path + ": rename from " + tmp.string() + ": " +
                      std::strerror(r));
  }
}

void prepare_out_dir(const std::string& option, const std::string& dir) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string bad;
  if (rank == 0) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      bad = ec.message();
    } else if (!fs::is_directory(dir, ec)) {
      bad = "not a directory";
    } else {
      // A byte written and flushed: a full filesystem takes an empty file, not its contents.
      const std::string probe =
          (fs::path(dir) / (".shardcheck_probe." + std::to_string(::getpid()))).string();
      try {
        write_file(probe, "probe\n");
      } catch (const error& e) {
        bad = e.what();
        const std::string prefix = "cannot write " + probe + ": ";
        if (bad.rfind(prefix, 0) == 0) bad = bad.substr(prefix.size());
      }
      fs::remove(probe, ec);
    }
  }
  int length = static_cast<int>(bad.size());
  par::check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD), "--out probe");
  bad.resize(static_cast<std::size_t>(length));
  par::check_mpi(MPI_Bcast(bad.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD), "--out probe");
  if (!bad.empty()) throw usage_error(option + ": cannot write into " + dir + ": " + bad);
}

void begin_steps(int total) {
  steps_state& s = steps();
  std::string text;
  {
    std::lock_guard guard(s.lock);
    s.total = total;
    s.done.clear();
    text = progress_text(s);
  }
  prop::last_words::doing(text);
}

void step(const std::string& what) {
  steps_state& s = steps();
  std::string text;
  {
    std::lock_guard guard(s.lock);
    s.done.push_back(what);
    text = progress_text(s);
  }
  prop::last_words::doing(text);
  prop::last_words::finished(text + "\n");
}

void partial_file(const std::string& path) {
  steps_state& s = steps();
  {
    // Written now: a result file that exists is valid JSON, and says whether it is complete.
    std::lock_guard guard(s.lock);
    write_partial(s, {path});
    s.files.push_back(path);
  }
  prop::last_words::on_interrupt(save_partial);
}

void results_final() {
  steps_state& s = steps();
  std::lock_guard guard(s.lock);
  s.final = true;
}

void nothing_checked(const std::string& why) { throw usage_error("nothing was checked: " + why); }

const std::string& command_name() { return name_; }

int run(CLI::App& app, int argc, char** argv, const std::vector<command>& commands,
        const par::process_hooks& hooks) {
  // No option takes an empty value: `--p ''` or `--backend ''` would otherwise be read as the
  // default, silently.
  // Nor a number past 64 bits: it would otherwise be read as the nearest 64-bit value (`--K
  // 99999999999999999999` as 9223372036854775807), silently.
  for (const command& c : commands)
    for (CLI::Option* o : c.app->get_options())
      if (o->get_type_size() != 0) o->check(not_empty())->check(within_64_bits());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Under mpirun every rank parses the same arguments: one message, from rank 0.
    if (follower_rank())
      return e.get_exit_code() == 0 ? prop::exit_code::pass : prop::exit_code::usage;
    if (e.get_exit_code() == 0)
      return app.exit(e) == 0 ? prop::exit_code::pass : prop::exit_code::usage;
    std::fprintf(stderr, "%s\nRun with --help for more information.\n", escape(e.what()).c_str());
    return prop::exit_code::usage;
  }
  const command* chosen = nullptr;
  for (const command& c : commands)
    if (c.app->parsed()) chosen = &c;
  if (chosen == nullptr) return prop::exit_code::usage;
  name_ = chosen->app->get_name();
  const bool mpi = chosen->needs_mpi && chosen->needs_mpi();
  std::unique_ptr<par::environment> env;
  // The extra kernels' process_hooks: `finalize` runs when this is destroyed, before env.
  struct hooks_scope {
    std::function<void()> finalize;
    hooks_scope() = default;
    hooks_scope(const hooks_scope&) = delete;
    hooks_scope& operator=(const hooks_scope&) = delete;
    ~hooks_scope() {
      if (!finalize) return;
      try {
        finalize();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "shardcheck: the finalize hook failed: %s\n", e.what());
      }
    }
  } hooks_done;
  int rank = 0;
  // Every error ends with its exit code; none escapes as an exception. A usage error is found
  // alike on every rank, which all return; a runtime error may be one rank's alone, so it ends
  // the job (MPI_Abort) rather than wait in MPI_Finalize for the others.
  const auto fail = [&](int code, const char* kind, const char* what) {
    if (rank == 0 || code != prop::exit_code::usage)
      std::fprintf(stderr, "shardcheck: %s%s\n", kind, escape(what).c_str());
    if (env != nullptr && code != prop::exit_code::usage) {
      int size = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      std::fflush(stderr);
      if (size > 1) PMPI_Abort(MPI_COMM_WORLD, code);  // not a kernel's (pmpi.hpp)
    }
    return code;
  };
  try {
    if (mpi) {
      env = std::make_unique<par::environment>(argc, argv);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      prop::last_words::install(rank, rank == 0);
      if (hooks.init) hooks.init(argc, argv);
      hooks_done.finalize = hooks.finalize;
    }
    const int code = chosen->run();
    // The output is final: a late signal (mpirun ending the job after another rank's failure)
    // ends this rank with its code, silently.
    if (mpi) prop::last_words::complete(code);
    return code;
  } catch (const mpi_error& e) {
    return fail(prop::exit_code::runtime, "MPI error: ", e.what());
  } catch (const shardcheck::error& e) {
    return fail(prop::exit_code::usage, "", e.what());
  } catch (const std::bad_alloc& e) {
    return fail(prop::exit_code::runtime, "out of memory: ", e.what());
  } catch (const std::exception& e) {
    return fail(prop::exit_code::runtime, "runtime error: ", e.what());
  }
}

}  // namespace shardcheck::runner
