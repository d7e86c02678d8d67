#include "baseline.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <unistd.h>

#include "results.hpp"

namespace shardcheck::baseline {

namespace {

using json = nlohmann::ordered_json;
constexpr const char* schema = "shardcheck-baseline/1";

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::uint64_t parse_hex(const std::string& s, const std::string& where) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(s, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.size() != 18 || s.rfind("0x", 0) != 0 || used != s.size())
    throw error(where + ": digest '" + s + "' is not 0x and 16 hex digits");
  return v;
}

// The case's shares per output tensor: its dtype's cell over every mode (one mode ran).
std::map<std::string, std::pair<double, double>> shares_of(const par::run_case& c,
                                                           const prop::case_verdict& v) {
  std::map<std::string, std::pair<double, double>> out;
  for (const par::tensor t : {par::tensor::y, par::tensor::dx, par::tensor::dw}) {
    const prop::error_cell e = v.errors.over_modes(c.prob.type, t);
    if (e.err_u_mag < 0) continue;  // not judged
    out[std::string(par::to_string(t))] = {e.rigorous, e.statistical};
  }
  return out;
}

std::string ratio_text(double was, double now) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3g was %.3g", now, was);
  return buf;
}

}  // namespace

book::book(std::string path, double growth, const std::string& fail_lanes, bool update)
    : path_(std::move(path)), growth_(growth), update_(update) {
  if (!(growth_ > 1)) throw error("--baseline-growth must be above 1");
  std::size_t pos = 0;
  while (pos < fail_lanes.size()) {
    const std::size_t comma = fail_lanes.find(',', pos);
    const std::string lane =
        fail_lanes.substr(pos, comma == std::string::npos ? comma : comma - pos);
    if (lane == "drift")
      fail_drift_ = true;
    else if (lane == "growth")
      fail_growth_ = true;
    else
      throw error("--baseline-fail: unknown lane '" + lane + "' (known: drift, growth)");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path_, ec)) {
    // Written at the end: its folder must take a new file now, not after every case has run.
    const fs::path dir = fs::absolute(fs::path(path_), ec).parent_path();
    if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
      throw error("--baseline: cannot write " + path_ + ": " + dir.string() +
                  " is not a writable folder");
    return;
  }
  existed_ = true;
  if (update_ && ::access(path_.c_str(), W_OK) != 0)
    throw error("--baseline-update: cannot write " + path_);
  std::ifstream in(path_);
  if (!in) throw error("--baseline: cannot read " + path_);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw error("--baseline: " + path_ + " is not JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string() ||
      j["schema"].get<std::string>() != schema || !j.contains("cases") || !j["cases"].is_object())
    throw error("--baseline: " + path_ + " is not a baseline (schema " + schema + ")");
  try {
    for (const auto& [line, rec] : j["cases"].items()) {
      case_record r;
      for (const auto& [name, d] : rec.at("digests").items())
        r.digests[name] = parse_hex(d.get<std::string>(), path_);
      for (const auto& [name, s] : rec.at("shares").items())
        r.shares[name] = {s.at(0).get<double>(), s.at(1).get<double>()};
      cases_[line] = std::move(r);
    }
  } catch (const json::exception& e) {
    throw error("--baseline: " + path_ + ": a case is malformed: " + e.what());
  }
}

void book::observe(const std::string& line, const par::run_case& c, const prop::case_verdict& v) {
  if (v.failed != 0 || v.digests.empty() || !seen_.insert(line).second) return;
  case_record now;
  for (std::size_t i = 0; i < v.digests.size() && i < v.output_names.size(); ++i)
    now.digests[v.output_names[i]] = v.digests[i];
  now.shares = shares_of(c, v);
  const auto it = cases_.find(line);
  if (it == cases_.end()) {
    cases_[line] = std::move(now);
    ++recorded_;
    return;
  }
  ++compared_;
  const case_record& was = it->second;
  std::string drift;
  for (const auto& [name, d] : now.digests) {
    const auto old = was.digests.find(name);
    if (old != was.digests.end() && old->second == d) continue;
    drift += (drift.empty() ? "" : ", ") + name + " " + hex(d) + " was " +
             (old == was.digests.end() ? std::string("absent") : hex(old->second));
  }
  if (!drift.empty()) findings_.push_back({"drift", line, drift});
  std::string grown;
  for (const auto& [name, s] : now.shares) {
    const auto old = was.shares.find(name);
    if (old == was.shares.end()) continue;
    const double tiers[2][2] = {{old->second.first, s.first}, {old->second.second, s.second}};
    const char* tier_names[2] = {"rigorous", "statistical"};
    for (int t = 0; t < 2; ++t) {
      const double before = tiers[t][0], after = tiers[t][1];
      if (after > least_share && after > growth_ * before)
        grown += (grown.empty() ? "" : ", ") + name + " " + tier_names[t] + " share " +
                 ratio_text(before, after);
    }
  }
  if (!grown.empty()) findings_.push_back({"growth", line, grown});
  if (update_) it->second = std::move(now);
}

void book::save() const {
  if (existed_ && !update_) return;
  json out = {{"schema", schema}, {"cases", json::object()}};
  for (const auto& [line, r] : cases_) {
    json d = json::object(), s = json::object();
    for (const auto& [name, v] : r.digests) d[name] = hex(v);
    for (const auto& [name, v] : r.shares) s[name] = {v.first, v.second};
    out["cases"][line] = {{"digests", d}, {"shares", s}};
  }
  results::write_atomically(path_, out.dump(1) + "\n");
}

bool book::fails(const std::string& lane) const {
  return lane == "drift" ? fail_drift_ : lane == "growth" ? fail_growth_ : false;
}

bool book::failed() const {
  if (existed_ && compared_ == 0 && (fail_drift_ || fail_growth_)) return true;
  for (const finding& f : findings_)
    if (fails(f.lane)) return true;
  return false;
}

int book::missing() const {
  int n = 0;
  for (const auto& [line, r] : cases_) n += seen_.contains(line) ? 0 : 1;
  return n;
}

std::string book::summary() const {
  int drifted = 0, grew = 0;
  for (const finding& f : findings_) (f.lane == "drift" ? drifted : grew) += 1;
  std::ostringstream os;
  os << "baseline " << path_ << ": " << compared_ << " cases compared, " << recorded_
     << (existed_ && !update_ ? " new (not in the file: --baseline-update adds them)" : " recorded")
     << "; " << drifted << " drifted (bits changed, every bound held), " << grew << " grew past "
     << growth_ << "× their share of a bound\n";
  if (existed_ && missing() > 0)
    os << "  " << missing() << " cases of the file not run here (another selection)\n";
  if (existed_ && compared_ == 0 && (fail_drift_ || fail_growth_))
    os << "  nothing compared: no case of this run is in the file (a failure with "
          "--baseline-fail)\n";
  constexpr std::size_t shown = 10;
  for (std::size_t i = 0; i < findings_.size() && i < shown; ++i)
    os << "  " << findings_[i].lane << (fails(findings_[i].lane) ? " (failure)" : " (warning)")
       << ": " << findings_[i].what << ": " << findings_[i].case_line << "\n";
  if (findings_.size() > shown)
    os << "  … " << findings_.size() - shown << " more (--json lists every one)\n";
  return os.str();
}

}  // namespace shardcheck::baseline
