// The catalogue: its names, the old mutants' cells, applicability from the claims.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "shardcheck/properties/mutants.hpp"

namespace shardcheck::prop {
namespace {

const mutant_set& catalogue() {
  static const mutant_set m(4);
  return m;
}

TEST(catalogue, names_every_cell_operator_at_strategy) {
  const mutant_set& m = catalogue();
  // Seven algorithm mutants and acc_in_storage each have one host, partials_in_storage four.
  EXPECT_EQ(m.cells().size(), (m.operators().size() - 9) * m.strategies().size() + 12);
  std::set<std::string> names;
  for (const mutant_cell& c : m.cells()) {
    EXPECT_EQ(c.name, "mutant." + c.op + "@" + c.strategy);
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_EQ(m.find(c.name), &c.s);
    ASSERT_NE(c.s.k, nullptr) << c.name;
  }
  EXPECT_EQ(m.find("mutant.no_such@data_parallel"), nullptr);
  EXPECT_EQ(m.find("data_parallel"), nullptr);
}

TEST(catalogue, every_old_mutant_has_an_applicable_cell) {
  const mutant_set& m = catalogue();
  EXPECT_EQ(old_mutants().size(), 31u);
  for (const old_mutant& o : old_mutants()) {
    const mutant_cell* c = m.cell(o.cell);
    ASSERT_NE(c, nullptr) << o.cell;
    EXPECT_TRUE(c->applies) << o.cell;
    EXPECT_EQ(m.find("mutant." + std::string(o.old_name)), &c->s) << o.old_name;
  }
  const subject* hang = m.find("mutant.dp_hang");
  ASSERT_NE(hang, nullptr);
  EXPECT_EQ(hang, m.find("mutant.unanswered@data_parallel"));
  EXPECT_EQ(hang->k->name(), "data_parallel");
}

TEST(catalogue, applicability_follows_the_claims) {
  const mutant_set& m = catalogue();
  const auto applies = [&](const char* op, const char* s) {
    const mutant_cell* c = m.cell(op, s);
    return c != nullptr && c->applies;
  };
  EXPECT_TRUE(applies("ar_skipped", "data_parallel"));
  EXPECT_FALSE(applies("bcast_wrong_root", "data_parallel"));
  EXPECT_TRUE(applies("bcast_wrong_root", "collective.broadcast"));
  EXPECT_FALSE(applies("a2a_reversed", "data_parallel"));
  EXPECT_TRUE(applies("p2p_lagged", "pipeline_gpipe"));
  EXPECT_FALSE(applies("p2p_lagged", "data_parallel"));
  EXPECT_FALSE(applies("ar_skipped", "pipeline_gpipe"));  // dp = 1: no collective
  EXPECT_TRUE(applies("float_inputs", "summa"));
  EXPECT_TRUE(applies("w_panel_wrong_row", "summa"));
  EXPECT_EQ(m.cell("w_panel_wrong_row", "data_parallel"), nullptr);  // one host only
}

TEST(catalogue, a_fault_wraps_only_at_its_position) {
  const mutant_set& m = catalogue();
  const subject* below = m.find("mutant.ag_drop_last@data_parallel");
  const subject* above = m.find("mutant.extra_barrier@data_parallel");
  ASSERT_NE(below, nullptr);
  ASSERT_NE(above, nullptr);
  auto inner = par::make_mpi_collectives(par::comm_handle());
  par::collectives* raw = inner.get();
  auto same = below->wrap(std::move(inner), par::layer_position::above, 0);
  EXPECT_EQ(same.get(), raw);
  auto wrapped = above->wrap(std::move(same), par::layer_position::above, 0);
  EXPECT_NE(wrapped.get(), raw);
  EXPECT_FALSE(m.find("mutant.copies_w@data_parallel")->wrap);  // a decorator: no layer
}

}  // namespace
}  // namespace shardcheck::prop
