#include "corpus.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::corpus {

void check_length(std::string_view line, std::string_view where) {
  if (line.size() > max_line_bytes)
    throw error(std::string(where) + ": a replay line of " + std::to_string(line.size()) +
                " bytes; at most " + std::to_string(max_line_bytes) + " (128 KiB) are accepted");
}

namespace {
std::string_view trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// Reads one line into `out` (without its newline), refusing it as soon as it passes
// max_line_bytes: an endless input without newlines (/dev/zero) ends at once, not in an OOM.
bool bounded_line(std::streambuf& in, std::string& out, const std::string& where) {
  out.clear();
  for (int ch = in.sbumpc(); ch != std::char_traits<char>::eof(); ch = in.sbumpc()) {
    if (ch == '\n') return true;
    out.push_back(static_cast<char>(ch));
    if (out.size() > max_line_bytes + 64)  // room for the blanks trimmed() removes
      throw error(where + ": a replay line longer than " + std::to_string(max_line_bytes) +
                  " bytes (128 KiB)");
  }
  return !out.empty();
}

std::vector<line> lines_of(std::istream& in, const std::string& name) {
  std::vector<line> out;
  std::string raw;
  int number = 0;
  std::streambuf& buf = *in.rdbuf();
  while (bounded_line(buf, raw, name + ":" + std::to_string(number + 1))) {
    ++number;
    if (number > max_lines)
      throw error(name + ": more than " + std::to_string(max_lines) + " lines");
    std::string_view text = trimmed(raw);
    if (number == 1 && text.starts_with("\xEF\xBB\xBF")) text = trimmed(text.substr(3));  // BOM
    if (text.empty() || text.front() == '#') continue;
    check_length(text, name + ":" + std::to_string(number));
    out.push_back({number, std::string(text)});
  }
  if (in.bad()) throw error("cannot read " + name + ": " + std::strerror(errno));
  return out;
}
}  // namespace

std::vector<line> read_lines(const std::string& path, bool missing_is_empty) {
  if (path == "-") return lines_of(std::cin, "stdin");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw error("cannot read " + path + ": it is a directory");
  std::ifstream in(path);
  if (!in) {
    if (missing_is_empty && errno == ENOENT) return {};
    throw error("cannot read " + path + ": " + std::strerror(errno));
  }
  return lines_of(in, path);
}

bool names_strategy(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t start = text.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) return false;
    if (text.substr(start).starts_with("strategy=")) return true;
    pos = text.find_first_of(" \t", start);
    if (pos == std::string_view::npos) return false;
  }
  return false;
}

std::string_view base_kernel(std::string_view strategy) {
  if (!strategy.starts_with("mutant.")) return strategy;
  const std::size_t at = strategy.find('@');
  return at == std::string_view::npos ? strategy : strategy.substr(at + 1);
}

void append(const std::string& path, const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  bool needs_newline = false;
  if (std::ifstream old(path, std::ios::binary | std::ios::ate); old && old.tellg() > 0) {
    old.seekg(-1, std::ios::end);
    needs_newline = old.get() != '\n';
  }
  std::ofstream out(path, std::ios::app | std::ios::binary);
  if (!out) throw error("cannot append to " + path + ": " + std::strerror(errno));
  if (needs_newline) out << '\n';
  for (const std::string& l : lines) out << l << '\n';
  out.flush();
  if (!out) throw error("cannot append to " + path + ": " + std::strerror(errno));
}

}  // namespace shardcheck::corpus
