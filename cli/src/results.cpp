#include "results.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <sstream>

#include "shardcheck/properties/verdict.hpp"

namespace shardcheck::results {

namespace {

constexpr auto runs_bit = static_cast<unsigned>(prop::property::runs);

// runs first, then the checked properties in their usual order.
std::vector<unsigned> every_property() {
  std::vector<unsigned> out{runs_bit};
  for (const prop::property p : prop::checked_properties) out.push_back(static_cast<unsigned>(p));
  return out;
}

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

// The length of the valid UTF-8 sequence at s[i] (its code point in `cp`), or 0 if the bytes
// there are not one: overlong forms, surrogates and code points above U+10FFFF are not.
std::size_t utf8_length(std::string_view s, std::size_t i, char32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char lead = b(0);
  std::size_t n = 0;
  char32_t min = 0;
  if (lead < 0x80) {
    cp = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    n = 2, cp = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3, cp = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void add_text_property(pugi::xml_node props, const char* name, const std::string& value) {
  pugi::xml_node p = props.append_child("property");
  p.append_attribute("name") = name;
  p.append_attribute("value") = xml_safe(value).c_str();
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// "; reproduced 3 of 8 re-runs (intermittent)", or nothing when the case was not run again.
std::string reproduced_text(const failure_record& f) {
  if (f.reruns == 0 && f.runs == 1) return {};
  std::string out = "; reproduced " + std::to_string(f.reproduced) + " of " +
                    std::to_string(f.reruns) + " re-runs";
  if (f.runs > 1) out += ", first failed on run " + std::to_string(f.runs);
  return out + (f.intermittent() ? " (intermittent)" : "");
}

// Every failure of property p, each with its replay line, e.g.
//   forward: Y[i=0, j=0] … (corpus line 3)
//   replay: mpirun -n 2 --oversubscribe shardcheck verify --replay '…'
std::string failure_text(const strategy_result& r, unsigned p) {
  std::string out;
  for (const failure_record& f : r.failures) {
    if ((f.failed & p) == 0) continue;
    if (!out.empty()) out += "\n";
    out += f.message;
    if (f.source != "generated") out += " (" + f.source + " line " + std::to_string(f.line) + ")";
    out += reproduced_text(f);
    out += "\nreplay: " + f.replay + "\n";
  }
  return out;
}

const failure_record* first_failure(const strategy_result& r, unsigned p) {
  for (const failure_record& f : r.failures)
    if ((f.failed & p) != 0) return &f;
  return nullptr;
}

std::string name_of(unsigned p) { return std::string(prop::to_string(prop::property{p})); }

// Every judged dtype × tensor × mode: {"dtype": "f32", "tensor": "Y", "mode": "uniform",
// "err_u_mag": 0.31, "rigorous_share": 1.2e-4, "statistical_share": 0.031}; a tier not applied
// (exact mode) is null.
nlohmann::ordered_json errors_json(const prop::error_figures& e) {
  using json = nlohmann::ordered_json;
  json out = json::array();
  const auto or_null = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  for (std::size_t t = 0; t < prop::error_figures::dtypes; ++t)
    for (const par::tensor out_t : {par::tensor::y, par::tensor::dx, par::tensor::dw})
      for (std::size_t m = 0; m < prop::error_figures::modes; ++m) {
        const auto type = static_cast<dtype>(t);
        const auto mode = static_cast<value_mode>(m);
        const prop::error_cell& c = e.cells[prop::error_figures::index(type, out_t, mode)];
        if (c.err_u_mag < 0) continue;
        out.push_back({{"dtype", to_string(type)},
                       {"tensor", par::to_string(out_t)},
                       {"mode", to_string(mode)},
                       {"err_u_mag", c.err_u_mag},
                       {"rigorous_share", or_null(c.rigorous)},
                       {"statistical_share", or_null(c.statistical)}});
      }
  return out;
}

}  // namespace

void strategy_result::add(const prop::case_verdict& v, unsigned mask) {
  ++replayed;
  worst_error = std::max(worst_error, v.worst_error);
  errors.merge(v.errors);
  for (int k = 0; k < 2; ++k) projected[k] = std::max(projected[k], v.projected[k]);
  recorded_sent = std::max(recorded_sent, v.recorded_sent);
  mpi_peak_bytes = std::max(mpi_peak_bytes, v.mpi_peak_bytes);
  if (v.failed == 0 && v.worst_memory >= worst_memory) {
    worst_memory = v.worst_memory;
    peak_bytes = v.peak_bytes;
    bound_bytes = v.bound_bytes;
  }
  not_claimed |= v.not_claimed;
  not_measured |= v.not_measured;
  judged |= mask & ~v.not_claimed & ~v.not_measured;
}

std::string_view status_of(const strategy_result& r, unsigned mask, unsigned p) {
  if (first_failure(r, p) != nullptr) return "fail";
  if ((r.not_claimed & ~(r.judged & prop::opt_in_properties) & p) != 0) return "not claimed";
  if ((r.not_measured & p) != 0) return "not measured";
  if (((mask | runs_bit) & p) == 0) return "not selected";
  return "pass";
}

std::string xml_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_length(s, i, cp);
    if (n == 0 || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r')) {
      out += hex_byte(static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (cp == 0xFFFE || cp == 0xFFFF)
      out += cp == 0xFFFE ? "\\u{FFFE}" : "\\u{FFFF}";
    else
      out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string junit_xml(const run_results& r) {
  pugi::xml_document doc;
  pugi::xml_node decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  pugi::xml_node suites = doc.append_child("testsuites");
  suites.append_attribute("name") = "shardcheck verify";
  int tests = 0, failures = 0, skipped = 0;
  double time = 0;
  for (const strategy_result& s : r.strategies) {
    pugi::xml_node suite = suites.append_child("testsuite");
    const std::string name = xml_safe(s.name);
    suite.append_attribute("name") = name.c_str();
    int suite_failures = 0, suite_skipped = 0;
    const std::vector<unsigned> props = every_property();
    pugi::xml_node meta = suite.append_child("properties");
    add_text_property(meta, "cases", std::to_string(s.cases));
    add_text_property(meta, "replayed", std::to_string(s.replayed));
    add_text_property(meta, "declined", std::to_string(s.declined));
    add_text_property(meta, "ranks", std::to_string(r.ranks));
    add_text_property(meta, "seed", std::to_string(r.seed));
    add_text_property(meta, "reruns", std::to_string(r.reruns));
    for (const unsigned p : props) {
      pugi::xml_node tc = suite.append_child("testcase");
      tc.append_attribute("classname") = name.c_str();
      tc.append_attribute("name") = name_of(p).c_str();
      const std::string_view status = status_of(s, r.mask, p);
      if (status == "fail") {
        ++suite_failures;
        pugi::xml_node f = tc.append_child("failure");
        const failure_record& first = *first_failure(s, p);
        f.append_attribute("message") = xml_safe(first.message + reproduced_text(first)).c_str();
        f.append_attribute("type") = name_of(p).c_str();
        f.text() = xml_safe(failure_text(s, p)).c_str();
      } else if (status != "pass") {
        ++suite_skipped;
        tc.append_child("skipped").append_attribute("message") = std::string(status).c_str();
      }
    }
    suite.append_attribute("tests") = static_cast<int>(props.size());
    suite.append_attribute("failures") = suite_failures;
    suite.append_attribute("errors") = 0;
    suite.append_attribute("skipped") = suite_skipped;
    suite.append_attribute("time") = seconds_text(s.seconds).c_str();
    tests += static_cast<int>(props.size());
    failures += suite_failures;
    skipped += suite_skipped;
    time += s.seconds;
  }
  if (r.baseline) {  // one testcase per lane: a failure when --baseline-fail names it
    pugi::xml_node suite = suites.append_child("testsuite");
    suite.append_attribute("name") = "baseline";
    int suite_failures = 0;
    for (const char* lane : {"drift", "growth"}) {
      pugi::xml_node tc = suite.append_child("testcase");
      tc.append_attribute("classname") = "baseline";
      tc.append_attribute("name") = lane;
      std::string text;
      bool failure = false;
      for (const auto& c : r.baseline->changes)
        if (c.lane == lane) {
          text += c.what + ": " + c.case_line + "\n";
          failure = failure || c.failure;
        }
      if (failure) {
        ++suite_failures;
        pugi::xml_node f = tc.append_child("failure");
        f.append_attribute("message") =
            xml_safe(std::string(lane) + " against " + r.baseline->file).c_str();
        f.append_attribute("type") = lane;
        f.text() = xml_safe(text).c_str();
      } else if (!text.empty()) {
        tc.append_child("system-out").text() = xml_safe(text).c_str();
      }
    }
    suite.append_attribute("tests") = 2;
    suite.append_attribute("failures") = suite_failures;
    suite.append_attribute("errors") = 0;
    suite.append_attribute("skipped") = 0;
    suite.append_attribute("time") = "0";
    tests += 2;
    failures += suite_failures;
  }
  suites.append_attribute("tests") = tests;
  suites.append_attribute("failures") = failures;
  suites.append_attribute("errors") = 0;
  suites.append_attribute("skipped") = skipped;
  suites.append_attribute("time") = seconds_text(time).c_str();
  std::ostringstream os;
  doc.save(os, "  ", pugi::format_default, pugi::encoding_utf8);
  return os.str();
}

std::string json_text(const run_results& r) {
  using json = nlohmann::ordered_json;
  json out = {{"schema", "shardcheck-verify/1"},
              {"complete", r.complete},
              {"program", r.program},
              {"ranks", r.ranks},
              {"seed", r.seed},
              {"cases_per_strategy", r.cases_per_strategy},
              {"reruns", r.reruns},
              {"properties", json::array()},
              {"corpus", r.corpus.empty() ? json(nullptr) : json(r.corpus)},
              {"strategies", json::array()}};
  for (const unsigned p : every_property())
    if (((r.mask | runs_bit) & p) != 0) out["properties"].push_back(name_of(p));
  int passed = 0;
  const auto memory = static_cast<unsigned>(prop::property::memory);
  for (const strategy_result& s : r.strategies) {
    json j = {
        {"name", s.name},
        {"result", !s.passed()          ? "fail"
                   : s.survived.empty() ? "pass"
                                        : s.survived},
        {"cases", s.cases},
        {"replayed", s.replayed},
        {"declined", s.declined},
        {"seconds", s.seconds},
        {"worst_error_ratio", s.worst_error},
        {"errors", errors_json(s.errors)},
        {"projection", s.projected[0] < 0
                           ? json(nullptr)
                           : json{{"rigorous_share", s.projected[0]},
                                  {"statistical_share",
                                   s.projected[1] < 0 ? json(nullptr) : json(s.projected[1])}}},
        {"max_recorded_bytes_sent", s.recorded_sent},
        {"max_mpi_heap_bytes", s.mpi_peak_bytes}};
    j["declined_example"] = s.declined_example.empty() ? json(nullptr) : json(s.declined_example);
    const std::string_view mem = status_of(s, r.mask, memory);
    if (mem == "not claimed" || mem == "not measured" || mem == "not selected")
      j["memory"] = mem;
    else
      j["memory"] = {
          {"peak_bytes", s.peak_bytes}, {"bound_bytes", s.bound_bytes}, {"ratio", s.worst_memory}};
    j["properties"] = json::object();
    for (const unsigned p : every_property()) j["properties"][name_of(p)] = status_of(s, r.mask, p);
    j["failures"] = json::array();
    for (const failure_record& f : s.failures) {
      json fj = {{"source", f.source}};
      fj["line"] = f.line == 0 ? json(nullptr) : json(f.line);
      fj["properties"] = json::array();
      for (const unsigned p : every_property())
        if ((f.failed & p) != 0) fj["properties"].push_back(name_of(p));
      fj["message"] = f.message;
      // An output's failure names the shape of its error (verdict.hpp): "zero", "permuted", …
      const std::string shape = prop::shape_named(f.message);
      fj["shape"] = shape.empty() ? json(nullptr) : json(shape);
      fj["case"] = f.case_line;
      fj["replay"] = f.replay;
      fj["reruns"] = f.reruns;
      fj["reproduced"] = f.reproduced;
      fj["runs_to_fail"] = f.runs;
      fj["intermittent"] = f.intermittent();
      j["failures"].push_back(fj);
    }
    passed += s.passed() ? 1 : 0;
    out["strategies"].push_back(j);
  }
  if (r.baseline) {
    json b = {{"file", r.baseline->file},
              {"compared", r.baseline->compared},
              {"recorded", r.baseline->recorded},
              {"growth_factor", r.baseline->growth},
              {"failing_lanes", r.baseline->failing_lanes},
              {"failed", r.baseline->failed},
              {"changes", json::array()}};
    for (const auto& c : r.baseline->changes)
      b["changes"].push_back(
          {{"lane", c.lane}, {"case", c.case_line}, {"what", c.what}, {"failure", c.failure}});
    out["baseline"] = b;
  } else {
    out["baseline"] = nullptr;
  }
  const auto n = static_cast<int>(r.strategies.size());
  out["summary"] = {{"strategies", n}, {"passed", passed}, {"failed", n - passed}};
  // Bytes that are not UTF-8 (none expected) become U+FFFD rather than failing the write.
  return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void write_atomically(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A symlink is followed: its target file is replaced, the link stays. Anything but a regular
  // file (/dev/null, a FIFO) is written in place: renaming over it would replace the device.
  fs::path target(path);
  if (fs::is_symlink(fs::symlink_status(target, ec))) target = fs::weakly_canonical(target, ec);
  const fs::file_status st = fs::status(target, ec);
  const bool in_place = fs::exists(st) && !fs::is_regular_file(st);
  if (fs::is_directory(st)) throw error("cannot write " + path + ": it is a directory");
  fs::path tmp = target;
  if (!in_place) tmp += ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool flushed = std::fflush(f) == 0;
  const int e = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !flushed || !closed) {
    if (!in_place) std::remove(tmp.c_str());
    throw error("cannot write " + tmp.string() + ": " + std::strerror(e));
  }
  if (in_place) return;
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int r = errno;
    std::remove(tmp.c_str());
    throw error("cannot rename " + tmp.string() + " to " + path + ": " + std::strerror(r));
  }
}

}  // namespace shardcheck::results
