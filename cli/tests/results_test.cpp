// The result writers and the corpus reader, without MPI: hostile text must come out as XML a
// strict parser reads back, and replay lines are read, limited and appended as documented.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pugixml.hpp>
#include <sstream>

#include "baseline.hpp"
#include "corpus.hpp"
#include "results.hpp"
#include "shardcheck/cli.hpp"

namespace shardcheck {
namespace {

namespace fs = std::filesystem;
constexpr auto forward = static_cast<unsigned>(prop::property::forward);
constexpr auto memory = static_cast<unsigned>(prop::property::memory);
constexpr auto ledger = static_cast<unsigned>(prop::property::ledger);

// Quotes, markup, control characters, invalid UTF-8 (a stray continuation byte, a lone 0xFF, an
// overlong '/', a UTF-16 surrogate), U+FFFE, and text that must survive (é, 😀, tab).
const std::string hostile =
    "a\"b'c<d>e&f]]>g\x01h\x1bi\x7f\x80j\xffk\xc0\xafl\xed\xa0\x80m\xef\xbf\xben\xc3\xa9\xf0\x9f"
    "\x98\x80\tend";

TEST(XmlSafe, KeepsValidTextAndSpellsOutTheRest) {
  EXPECT_EQ(results::xml_safe("plain é 😀\t\n"), "plain é 😀\t\n");
  EXPECT_EQ(results::xml_safe("a\x01"
                              "b\xff"),
            "a\\x01b\\xFF");
  EXPECT_EQ(results::xml_safe("\xc0\xaf"), "\\xC0\\xAF");           // overlong '/'
  EXPECT_EQ(results::xml_safe("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(results::xml_safe("\xef\xbf\xbe"), "\\u{FFFE}");
  EXPECT_EQ(results::xml_safe("\xe2\x82"), "\\xE2\\x82");  // cut short
  EXPECT_EQ(results::xml_safe("\x7f"), "\x7f");            // DEL is allowed in XML 1.0
}

results::run_results hostile_run() {
  results::run_results r;
  r.program = "shardcheck";
  r.ranks = 2;
  r.cases_per_strategy = 10;
  r.mask = prop::all_properties & ~static_cast<unsigned>(prop::property::replicas);
  results::strategy_result s;
  s.name = "k" + hostile;
  s.cases = 3;
  s.not_claimed = memory;
  s.failures.push_back({.source = "corpus",
                        .line = 4,
                        .failed = forward | ledger,
                        .message = "forward: " + hostile,
                        .case_line = "strategy=k p=1 M=1 N=1 K=1",
                        .replay = "mpirun -n 1 --oversubscribe shardcheck verify --replay 'x'"});
  r.strategies.push_back(s);
  return r;
}

TEST(Junit, HostileTextParsesBackStrictly) {
  const std::string xml = results::junit_xml(hostile_run());
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(xml.c_str()));
  const pugi::xml_node suite = doc.child("testsuites").child("testsuite");
  EXPECT_EQ(suite.attribute("name").value(), results::xml_safe("k" + hostile));
  EXPECT_STREQ(suite.attribute("tests").value(), "8");
  EXPECT_STREQ(suite.attribute("failures").value(), "2");
  EXPECT_STREQ(suite.attribute("skipped").value(), "2");  // memory not claimed, replicas not run
  const pugi::xml_node fwd = suite.find_child_by_attribute("testcase", "name", "forward");
  EXPECT_EQ(fwd.child("failure").attribute("message").value(),
            results::xml_safe("forward: " + hostile));
  EXPECT_NE(std::string(fwd.child("failure").text().get()).find("replay: mpirun -n 1"),
            std::string::npos);
  const pugi::xml_node mem = suite.find_child_by_attribute("testcase", "name", "memory");
  EXPECT_STREQ(mem.child("skipped").attribute("message").value(), "not claimed");
  const pugi::xml_node rep = suite.find_child_by_attribute("testcase", "name", "replicas");
  EXPECT_STREQ(rep.child("skipped").attribute("message").value(), "not selected");
  // No raw control character but tab and newline anywhere in the document.
  for (const char ch : xml)
    EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') << int(ch);
  // For the strict reader of cli.junit_hostile (Python's expat through junitparser).
  if (const char* out = std::getenv("SHARDCHECK_HOSTILE_JUNIT")) {
    results::write_atomically(out, xml);
    std::ofstream(std::string(out) + ".expected") << results::xml_safe("forward: " + hostile);
  }
}

TEST(Json, HostileTextStaysJson) {
  const std::string text = results::json_text(hostile_run());
  EXPECT_NE(text.find("\"not claimed\""), std::string::npos);
  EXPECT_NE(text.find("\"source\": \"corpus\""), std::string::npos);
  EXPECT_NE(text.find("\"line\": 4"), std::string::npos);
}

// A failure's rate: in the JUnit message and text, and in the JSON; intermittent when some run of
// the case passed (a re-run, or a run before the first failure), never when all failed.
TEST(Rerun, RateInJunitAndJson) {
  results::run_results r;
  r.reruns = 8;
  results::strategy_result& s = r.strategies.emplace_back();
  s.name = "k";
  results::failure_record f;
  f.source = "generated";
  f.failed = forward;
  f.message = "forward: x";
  f.reruns = 8;
  f.reproduced = 3;
  s.failures.push_back(f);
  f.reproduced = 8;
  s.failures.push_back(f);
  EXPECT_TRUE(s.failures[0].intermittent());
  EXPECT_FALSE(s.failures[1].intermittent());
  s.failures[1].runs = 2;
  EXPECT_TRUE(s.failures[1].intermittent());
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(results::junit_xml(r).c_str()));
  const pugi::xml_node suite = doc.child("testsuites").child("testsuite");
  EXPECT_STREQ(suite.find_child_by_attribute("testcase", "name", "forward")
                   .child("failure")
                   .attribute("message")
                   .value(),
               "forward: x; reproduced 3 of 8 re-runs (intermittent)");
  EXPECT_STREQ(suite.child("properties")
                   .find_child_by_attribute("name", "reruns")
                   .attribute("value")
                   .value(),
               "8");
  const std::string json = results::json_text(r);
  EXPECT_NE(json.find("\"reproduced\": 3"), std::string::npos);
  EXPECT_NE(json.find("\"intermittent\": true"), std::string::npos);
  EXPECT_NE(json.find("\"runs_to_fail\": 2"), std::string::npos);
}

// An intermittent failure's replay runs its case as often as its measured rate asks; a rate of 1
// needs no more runs than the re-runs themselves.
TEST(Rerun, RepeatFromTheRate) {
  EXPECT_EQ(prop::repeat_for(3, 8), 10);
  EXPECT_EQ(prop::repeat_for(0, 8), 44);
  EXPECT_EQ(prop::repeat_for(8, 8), 9);
  EXPECT_EQ(prop::repeat_for(0, 1000), 1000);
}

// The replay line of an intermittent failure carries --repeat; the shrink command launches as the
// replay does.
TEST(Rerun, ReplayAndShrinkCommands) {
  par::run_case c;
  c.strategy = "k";
  c.p = 3;
  c.prob.M = c.prob.N = c.prob.K = 1;
  const std::string line = c.to_string();
  EXPECT_NE(prop::replay_command("sc", c, prop::all_properties, prop::default_case_timeout, 10)
                .find(" verify --repeat 10 --replay "),
            std::string::npos);
  EXPECT_EQ(prop::replay_command("sc", c).find("--repeat"), std::string::npos);
  const std::string shrink = prop::shrink_command("sc", c);
  EXPECT_EQ(shrink.rfind("sc shrink --replay '" + line + "' -- " + prop::launch_command(3), 0), 0U)
      << shrink;
}

TEST(WriteAtomically, ReplacesTheFileWhole) {
  const fs::path dir =
      fs::temp_directory_path() / ("shardcheck_results_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string f = (dir / "r.xml").string();
  results::write_atomically(f, "first, longer text");
  results::write_atomically(f, "second");
  std::ifstream in(f);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  EXPECT_THROW(results::write_atomically((dir / "no" / "such" / "r.xml").string(), "x"), error);
  fs::remove_all(dir);
}

TEST(Corpus, ReadsLinesSkippingCommentsAndBlanks) {
  const fs::path f =
      fs::temp_directory_path() / ("shardcheck_corpus_" + std::to_string(::getpid()));
  std::ofstream(f) << "# a comment\n\n  strategy=a p=1 M=1 N=1 K=1  \r\np=2 M=1 N=1 K=1";
  const auto lines = corpus::read_lines(f.string(), false);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0].number, 3);
  EXPECT_EQ(lines[0].text, "strategy=a p=1 M=1 N=1 K=1");
  EXPECT_EQ(lines[1].number, 4);
  EXPECT_TRUE(corpus::names_strategy(lines[0].text));
  EXPECT_FALSE(corpus::names_strategy(lines[1].text));
  EXPECT_FALSE(corpus::names_strategy("p=1 mystrategy=a"));
  // Appending after a last line without its newline starts a new line.
  corpus::append(f.string(), {"strategy=b p=1 M=1 N=1 K=1"});
  EXPECT_EQ(corpus::read_lines(f.string(), false).back().text, "strategy=b p=1 M=1 N=1 K=1");
  EXPECT_EQ(corpus::read_lines(f.string(), false).size(), 3U);
  fs::remove(f);
  EXPECT_TRUE(corpus::read_lines(f.string(), true).empty());
  EXPECT_THROW((void)corpus::read_lines(f.string(), false), error);
}

TEST(Corpus, MutantCellsStandForTheirKernel) {
  EXPECT_EQ(corpus::base_kernel("mutant.ag_reversed@data_parallel"), "data_parallel");
  EXPECT_EQ(corpus::base_kernel("data_parallel"), "data_parallel");
}

TEST(Corpus, LinesAreLimitedTo128KiB) {
  EXPECT_NO_THROW(corpus::check_length(std::string(128 * 1024, 'x'), "--replay"));
  EXPECT_THROW(corpus::check_length(std::string(128 * 1024 + 1, 'x'), "--replay"), error);
}

// Linux refuses an argv string above 128 KiB itself (MAX_ARG_STRLEN), so the limit on --replay is
// tried in process: bad usage, before MPI starts.
TEST(Cli, ReplayArgumentAbove128KiBIsBadUsage) {
  std::string program = "shardcheck", verify = "verify", flag = "--replay";
  std::string line = "strategy=data_parallel p=1 M=1 N=1 K=1 " + std::string(200 * 1024, ' ');
  char* argv[] = {program.data(), verify.data(), flag.data(), line.data(), nullptr};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli_main(4, argv), 2);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("at most 131072 (128 KiB)"),
            std::string::npos);
}

// A passing case's verdict as the driver reduces it with digests kept: Y's digest and its f64
// shares of both bounds.
prop::case_verdict digested(std::uint64_t y_digest, double rigorous, double statistical) {
  prop::case_verdict v;
  v.output_names = {"Y", "dX", "dW"};
  v.digests = {y_digest, 2, 3};
  v.errors.at(dtype::f64, par::tensor::y, value_mode::uniform) = {1, rigorous, statistical};
  return v;
}

TEST(Baseline, RecordsThenReportsDriftAndGrowthOnlyPastTheFactor) {
  const fs::path f = fs::temp_directory_path() / ("baseline_test_" + std::to_string(::getpid()));
  fs::remove(f);
  const par::run_case c = par::run_case::parse(
      "strategy=k p=2 M=3 N=4 K=5 dtype=f64 layout=out_in mode=uniform seed=1 backend=mpi");
  {
    baseline::book first(f.string(), 2, "", false);
    first.observe(c.to_string(), c, digested(1, 0.1, 0.2));
    first.save();
    EXPECT_EQ(first.recorded(), 1);
  }
  baseline::book same(f.string(), 2, "", false);
  same.observe(c.to_string(), c, digested(1, 0.19, 0.39));  // under 2×: no growth
  EXPECT_EQ(same.compared(), 1);
  EXPECT_TRUE(same.findings().empty());
  baseline::book changed(f.string(), 2, "growth", false);
  changed.observe(c.to_string(), c,
                  digested(7, 0.25, 0.2));  // Y's bits changed; rigorous share 2.5×
  ASSERT_EQ(changed.findings().size(), 2U);
  EXPECT_EQ(changed.findings()[0].lane, "drift");
  EXPECT_EQ(changed.findings()[0].what, "Y 0x0000000000000007 was 0x0000000000000001");
  EXPECT_EQ(changed.findings()[1].lane, "growth");
  EXPECT_EQ(changed.findings()[1].what, "Y rigorous share 0.25 was 0.1");
  EXPECT_TRUE(changed.failed());  // growth is a failing lane here, drift a warning
  EXPECT_TRUE(changed.fails("growth"));
  EXPECT_FALSE(changed.fails("drift"));
  // A failing case is neither compared nor recorded.
  prop::case_verdict bad = digested(9, 0.9, 0.9);
  bad.failed = forward;
  changed.observe(c.to_string(), c, bad);
  EXPECT_EQ(changed.compared(), 1);
  fs::remove(f);
}

TEST(Baseline, SharesUnderOnePercentNeverGrow) {
  const fs::path f = fs::temp_directory_path() / ("baseline_small_" + std::to_string(::getpid()));
  fs::remove(f);
  const par::run_case c = par::run_case::parse(
      "strategy=k p=1 M=1 N=1 K=1 dtype=f64 layout=out_in mode=uniform seed=2 backend=mpi");
  const par::run_case d = par::run_case::parse(
      "strategy=k p=1 M=1 N=1 K=1 dtype=f64 layout=out_in mode=uniform seed=3 backend=mpi");
  {
    baseline::book first(f.string(), 2, "", false);
    first.observe(c.to_string(), c, digested(1, 0, 0.001));
    first.observe(d.to_string(), d, digested(1, 0, 0.001));
    first.save();
  }
  baseline::book later(f.string(), 2, "growth", false);
  later.observe(c.to_string(), c, digested(1, 0.009, 0.009));
  EXPECT_TRUE(later.findings().empty());
  later.observe(c.to_string(), c, digested(1, 0.5, 0.5));  // a key seen already: passed over
  EXPECT_TRUE(later.findings().empty());
  EXPECT_EQ(later.missing(), 1);
  later.observe(d.to_string(), d, digested(1, 0.02, 0));
  ASSERT_EQ(later.findings().size(), 1U);
  EXPECT_EQ(later.findings()[0].what, "Y rigorous share 0.02 was 0");
  EXPECT_EQ(later.missing(), 0);
  // A failing lane with nothing compared is a failure: the gate checked nothing.
  baseline::book none(f.string(), 2, "drift", false);
  EXPECT_TRUE(none.failed());
  fs::remove(f);
}

TEST(Baseline, BadFilesAndOptionsAreErrors) {
  const fs::path f = fs::temp_directory_path() / ("baseline_bad_" + std::to_string(::getpid()));
  std::ofstream(f) << "{\"schema\": \"other\"}";
  EXPECT_THROW(baseline::book(f.string(), 2, "", false), error);
  std::ofstream(f) << "not json";
  EXPECT_THROW(baseline::book(f.string(), 2, "", false), error);
  std::ofstream(f) << R"({"schema": 1, "cases": {}})";
  EXPECT_THROW(baseline::book(f.string(), 2, "", false), error);
  std::ofstream(f) << R"({"schema": "shardcheck-baseline/1", "cases": {"x": {"digests": )"
                   << R"({"Y": "0x12"}, "shares": {}}}})";
  EXPECT_THROW(baseline::book(f.string(), 2, "", false), error);
  fs::remove(f);
  EXPECT_THROW(baseline::book(f.string(), 1, "", false), error);
  EXPECT_THROW(baseline::book(f.string(), 2, "drift,speed", false), error);
  EXPECT_THROW(baseline::book("/nonexistent/folder/b.json", 2, "", false), error);
}

}  // namespace
}  // namespace shardcheck
