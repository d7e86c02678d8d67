#pragma once
// verify --baseline FILE: what each case's outputs were, kept across runs (and versions of a
// kernel), and what changed since. Per case line, each output's digest (invariance.hpp: the same
// whichever ranks held which elements) and, per output tensor, the share of the rigorous and of
// the statistical bound its error took. A later run sets each case it finds there against it:
//   drift   an output's bits changed, though every bound held (another summation order, say);
//   growth  an error's share of a bound grew past `growth` times what it was (and above 1 %).
// Each lane is a warning, or a failure (exit 1) when --baseline-fail names it. A file that does
// not exist is written from the run; --baseline-update rewrites it with the run's values. Its
// directory (or the file) must be writable: checked before any case runs.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "shardcheck/parallel/case.hpp"
#include "shardcheck/properties/driver.hpp"

namespace shardcheck::baseline {

// One case as the file keeps it.
struct case_record {
  std::map<std::string, std::uint64_t> digests;  // output name (Y, dX, dW, dW2, …) → digest
  // Output tensor (Y, dX, dW) → {share of the rigorous bound, of the statistical}.
  std::map<std::string, std::pair<double, double>> shares;
};

// One change found, e.g. {"drift", "strategy=… p=2 …", "Y: 0x… was 0x…"}.
struct finding {
  std::string lane;  // "drift" or "growth"
  std::string case_line;
  std::string what;
};

// Shares of a bound under this never count as grown: an error that small is noise of the data.
inline constexpr double least_share = 0.01;

class book {
 public:
  // Reads `path` when it exists (throws shardcheck::error, exit 2, on a file that is not one).
  // fail_lanes: "drift", "growth", both comma-separated, or "" (warnings only).
  book(std::string path, double growth, const std::string& fail_lanes, bool update);
  // A case that passed, under `key` (its line as written: a drawn case's complete line, a
  // replayed one's as the file wrote it): set against its record, or recorded when the file has
  // none. A key seen before in this run is passed over. Leader only.
  void observe(const std::string& key, const par::run_case& c, const prop::case_verdict& v);
  // Writes the file when it did not exist or on update (throws error when it cannot).
  void save() const;
  // The summary printed after the table, e.g.
  //   baseline b.json: 40 cases compared, 0 new; 2 drifted (bits changed, every bound held),
  //   0 grew past 2× their share of a bound
  //     drift: Y 0x1c… was 0x9a…: strategy=row_parallel p=2 …
  [[nodiscard]] std::string summary() const;
  // True when a lane --baseline-fail names found something, or when such a lane is set and no
  // case of the run was in the file (a gate that compared nothing is no pass).
  [[nodiscard]] bool failed() const;
  // Cases of the file this run did not meet (another selection of strategies, say).
  [[nodiscard]] int missing() const;
  [[nodiscard]] const std::vector<finding>& findings() const { return findings_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int compared() const { return compared_; }
  [[nodiscard]] int recorded() const { return recorded_; }
  [[nodiscard]] double growth() const { return growth_; }
  [[nodiscard]] bool fails(const std::string& lane) const;

 private:
  std::string path_;
  double growth_;
  bool fail_drift_ = false, fail_growth_ = false, update_ = false, existed_ = false;
  std::map<std::string, case_record> cases_;  // by case line
  std::set<std::string> seen_;                // the keys this run met
  std::vector<finding> findings_;
  int compared_ = 0, recorded_ = 0;
};

}  // namespace shardcheck::baseline
