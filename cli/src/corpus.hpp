#pragma once
// Replay lines kept in a file: a regression corpus (`verify --corpus FILE`) or a batch of cases
// (`verify --replay-file FILE`, `-` for stdin). One replay line per line; blank lines and lines
// starting with `#` are skipped:
//   # found by CI: an empty shard on rank 0
//   strategy=my_kernel p=2 M=1 N=3 K=2 dtype=f64 mode=exact part.M=0,1
//   p=3 M=7 N=5 K=4 mode=cancel          (no strategy=: every kernel under test that takes it)
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::corpus {

// The longest replay line accepted, from an argument or a file: 128 KiB.
inline constexpr std::size_t max_line_bytes = 128 * 1024;
// A file of replay lines holds at most this many (an endless stdin ends, not in an OOM).
inline constexpr int max_lines = 1000000;
// Throws shardcheck::error naming `where` (e.g. "--replay") when `line` is longer.
void check_length(std::string_view line, std::string_view where);

struct line {
  int number = 0;  // 1-based, in the file
  std::string text;
};

// The replay lines of `path` ("-": standard input), each checked with check_length. A missing
// file has none when `missing_is_empty` (a corpus not yet written), else throws shardcheck::error.
[[nodiscard]] std::vector<line> read_lines(const std::string& path, bool missing_is_empty);

// Whether the line sets strategy=, e.g. true for "strategy=a p=1 M=1 N=1 K=1", false for
// "p=1 M=1 N=1 K=1".
[[nodiscard]] bool names_strategy(std::string_view text);

// The kernel a line's strategy stands for: a mutant cell is a broken build of its kernel, so
// base_kernel("mutant.ag_reversed@data_parallel") == "data_parallel", and a corpus line found on
// the cell is re-checked on the kernel. base_kernel("data_parallel") == "data_parallel".
[[nodiscard]] std::string_view base_kernel(std::string_view strategy);

// Appends each of `lines` and a newline to `path`, creating it if needed (after a newline, if
// the file does not end with one); throws shardcheck::error.
void append(const std::string& path, const std::vector<std::string>& lines);

}  // namespace shardcheck::corpus
