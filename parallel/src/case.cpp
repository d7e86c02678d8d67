#include "shardcheck/parallel/case.hpp"

#include <charconv>
#include <cstdio>
#include <set>
#include <sstream>

namespace shardcheck::par {

std::string_view to_string(check_method m) {
  switch (m) {
    case check_method::automatic: return "auto";
    case check_method::reference: return "reference";
    case check_method::projection: return "projection";
  }
  return "?";
}

check_method parse_check_method(std::string_view s) {
  if (s == "auto") return check_method::automatic;
  if (s == "reference") return check_method::reference;
  if (s == "projection") return check_method::projection;
  throw invalid_problem("check '" + std::string(s) + "': expected auto, reference or projection");
}

std::string run_case::to_string() const {
  std::ostringstream os;
  os << "strategy=" << strategy << " p=" << p << " M=" << prob.M << " N=" << prob.N
     << " K=" << prob.K;
  if (!prob.hidden.empty())
    os << " H=" << partition(prob.hidden).to_string() << " act=" << shardcheck::to_string(prob.act);
  os << " dtype=" << shardcheck::to_string(prob.type);
  if (is_storage16(prob.type)) os << ' ' << shardcheck::to_string(policy);
  os << " layout=" << shardcheck::to_string(prob.layout) << " mode=" << shardcheck::to_string(mode)
     << " seed=" << seed << " backend=" << par::to_string(backend);
  if (check != check_method::automatic) os << " check=" << par::to_string(check);
  for (const auto& [key, part] : parts) os << " part." << key << '=' << part.to_string();
  for (const auto& [key, value] : params) os << ' ' << key << '=' << value;
  return os.str();
}

namespace {
template <class I>
I parse_int(std::string_view key, std::string_view v) {
  I out{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    throw invalid_problem("replay line: " + std::string(key) + "='" + std::string(v) +
                          "' is not an integer in range");
  return out;
}
}  // namespace

run_case run_case::parse(std::string_view line) {
  // Printable ASCII and blanks only, so that no message echoes a control sequence.
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto b = static_cast<unsigned char>(line[i]);
    if ((b < 0x20 && b != '\t') || b >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      throw invalid_problem("replay line: byte " + std::string(hex) + " at column " +
                            std::to_string(i + 1) + " (a replay line is printable ASCII)");
    }
  }
  run_case c;
  std::set<std::string, std::less<>> seen;
  std::size_t pos = 0;
  while (pos < line.size()) {
    if (line[pos] == ' ' || line[pos] == '\t') {
      ++pos;
      continue;
    }
    std::size_t end = line.find_first_of(" \t", pos);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view token = line.substr(pos, end - pos);
    pos = end;
    const std::size_t eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw invalid_problem("replay line: '" + std::string(token) +
                            "' is not key=value (expected e.g. 'strategy=data_parallel p=2 M=4 "
                            "N=3 K=5 dtype=f64 layout=out_in mode=exact seed=1 part.M=2,2')");
    const std::string key(token.substr(0, eq));
    const std::string_view value = token.substr(eq + 1);
    if (!seen.insert(key).second) throw invalid_problem("replay line: key '" + key + "' repeated");
    if (key == "strategy") {
      if (value.empty()) throw invalid_problem("replay line: empty strategy");
      c.strategy = std::string(value);
    } else if (key == "p") {
      c.p = parse_int<int>(key, value);
    } else if (key == "M") {
      c.prob.M = parse_int<std::int64_t>(key, value);
    } else if (key == "N") {
      c.prob.N = parse_int<std::int64_t>(key, value);
    } else if (key == "K") {
      c.prob.K = parse_int<std::int64_t>(key, value);
    } else if (key == "H") {
      try {
        c.prob.hidden = partition::parse(value).sizes();
      } catch (const invalid_problem&) {
        throw invalid_problem("replay line: H='" + std::string(value) +
                              "' is not a comma-separated list of hidden widths like 6,4");
      }
    } else if (key == "act") {
      c.prob.act = parse_activation(value);
    } else if (key == "dtype") {
      c.prob.type = parse_dtype(value);
    } else if (key == "acc") {
      c.policy.acc = parse_dtype(value);
    } else if (key == "reduce") {
      c.policy.reduce = parse_dtype(value);
    } else if (key == "layout") {
      c.prob.layout = parse_weight_layout(value);
    } else if (key == "mode") {
      c.mode = parse_value_mode(value);
    } else if (key == "seed") {
      c.seed = parse_int<std::uint64_t>(key, value);
    } else if (key == "backend") {
      c.backend = parse_backend_spec(value);
    } else if (key == "check") {
      try {
        c.check = parse_check_method(value);
      } catch (const invalid_problem& e) {
        throw invalid_problem(std::string("replay line: ") + e.what());
      }
    } else if (key.starts_with("part.") && key.size() > 5) {
      c.parts.emplace(key.substr(5), partition::parse(value));
    } else {
      c.params[key] = parse_int<std::int64_t>(key, value);
    }
  }
  for (const char* required : {"strategy", "p", "M", "N", "K"})
    if (seen.count(required) == 0)
      throw invalid_problem(std::string("replay line: missing ") + required + "=");
  if (c.p < 1 || c.p > max_parts)
    throw invalid_problem("replay line: p=" + std::to_string(c.p) + ": p must be between 1 and " +
                          std::to_string(max_parts));
  c.prob.validate();
  if (is_storage16(c.prob.type) || seen.count("acc") != 0 || seen.count("reduce") != 0) {
    try {
      validate_policy(c.prob.type, c.policy);
    } catch (const invalid_problem& e) {
      throw invalid_problem(std::string("replay line: ") + e.what());
    }
  }
  return c;
}

std::int64_t run_case::param(const std::string& name) const {
  const auto it = params.find(name);
  if (it == params.end()) throw invalid_problem("case has no parameter '" + name + "'");
  return it->second;
}

const partition& run_case::part(const std::string& key) const {
  const auto it = parts.find(key);
  if (it == parts.end()) throw invalid_problem("case has no partition part." + key);
  return it->second;
}

}  // namespace shardcheck::par
