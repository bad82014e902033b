// Collective tables in the profile: round trip at the top level, migration from provenance, errors for
// corrupt or partial tables at their JSON path, lookup, and the time of any size from a table.
#include <gtest/gtest.h>

#include <cmath>

#include "cost/collective_tables.hpp"
#include "core/error.hpp"

namespace twin {
namespace {

using nlohmann::json;

CollectiveTable table() {
  CollectiveTable t;
  t.gpu = "H200-141GB";
  t.collective = OpKind::reduce_scatter;
  t.group_size = 4;
  t.ranks_per_node = 4;
  t.nominal_bandwidth_GBps = 450;
  t.fit.latency_us = 2.5;
  t.fit.bandwidth.peak = 0.75;
  t.points = {{4096, 20, 0.2048, 0.1536}, {8192, 21, 0.39, 0.29}};
  return t;
}

Profile profile_with_tables() {
  Profile p = builtin_profile();
  p.builtin = false;
  p.collectives = {table()};
  return p;
}

// Expects profile_from_json to throw InputError at `path` with `expected` in its message.
void expect_error(const json& document, const std::string& path, const std::string& expected) {
  try {
    profile_from_json(document, "p.json");
    ADD_FAILURE() << "no error for " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(CollectiveTables, RoundTripAtTheTopLevelOfTheProfile) {
  const json document = to_json(profile_with_tables());
  ASSERT_TRUE(document.contains("collectives"));
  EXPECT_EQ(document["collectives"]["version"], kCollectiveTablesVersion);
  Profile without = builtin_profile();
  without.collectives.clear();
  EXPECT_FALSE(to_json(without).contains("collectives"));  // none measured, none written
  const Profile back = profile_from_json(document, "p.json");
  ASSERT_EQ(back.collectives.size(), 1u);
  const CollectiveTable& t = back.collectives[0];
  EXPECT_EQ(t.gpu, "H200-141GB");
  EXPECT_EQ(t.collective, OpKind::reduce_scatter);
  EXPECT_EQ(t.group_size, 4);
  EXPECT_DOUBLE_EQ(t.fit.bandwidth.peak, 0.75);
  ASSERT_EQ(t.points.size(), 2u);
  EXPECT_EQ(t.points[1].size_bytes, 8192);
  EXPECT_DOUBLE_EQ(t.points[0].busbw_GBps, 0.1536);
  EXPECT_EQ(to_json(back), document);
}

TEST(CollectiveTables, LegacyProvenanceTablesMoveToTheTop) {
  Profile without = builtin_profile();
  without.collectives.clear();
  json document = to_json(without);
  json legacy = collective_tables_to_json({table()})["tables"];
  legacy[0].erase("gpu");
  legacy[0]["columns"] = {"size_B", "time_us", "algbw_GBps", "busbw_GBps"};
  document["provenance"] = {{"gpu_preset", "H100-SXM-80GB"}, {"collectives", legacy}};
  const Profile p = profile_from_json(document, "old.json");
  ASSERT_EQ(p.collectives.size(), 1u);
  EXPECT_EQ(p.collectives[0].gpu, "H100-SXM-80GB");
  EXPECT_FALSE(p.provenance.contains("collectives"));
  document["provenance"].erase("gpu_preset");
  expect_error(document, "/provenance/collectives", "gpu_preset");
}

TEST(CollectiveTables, CorruptOrPartialTablesNameTheirPath) {
  const json good = to_json(profile_with_tables());
  json bad = good;
  bad["collectives"]["tables"][0]["collective"] = "broadcast";
  expect_error(bad, "/collectives/tables/0/collective", "broadcast");
  bad = good;
  bad["collectives"]["tables"][0].erase("rows");
  expect_error(bad, "/collectives/tables/0", "missing required key 'rows'");
  bad = good;
  bad["collectives"]["tables"][0]["rows"][0] = {4096, 20};
  expect_error(bad, "/collectives/tables/0/rows/0", "expected a row");
  bad = good;
  bad["collectives"]["tables"][0]["rows"][1][0] = 4096;
  expect_error(bad, "/collectives/tables/0/rows/1/0", "ascend");
  bad = good;
  bad["collectives"]["tables"][0]["rows"][0][1] = -3;
  expect_error(bad, "/collectives/tables/0/rows/0/1", "positive");
  bad = good;
  bad["collectives"]["tables"][0]["nodes"] = 0;
  expect_error(bad, "/collectives/tables/0/nodes", "integer");
  bad = good;
  bad["collectives"]["tables"][0]["ranks_per_node"] = 1;  // 1 node of 1 rank cannot hold 4
  expect_error(bad, "/collectives/tables/0/nodes", "cannot hold");
  bad = good;
  bad["collectives"]["tables"].push_back(bad["collectives"]["tables"][0]);
  expect_error(bad, "/collectives/tables/1", "a second reduce_scatter table");
  bad = good;
  bad["collectives"]["version"] = 2;
  expect_error(bad, "/collectives/version", "version 1");
  bad = good;
  bad["collectives"]["columns"][1] = "time_ms";
  expect_error(bad, "/collectives/columns", "size_B");
  bad = good;
  bad["collectives"]["tables"][0]["fit"].erase("latency_us");
  expect_error(bad, "/collectives/tables/0/fit", "latency_us");
  bad = good;
  bad["collectives"]["tables"][0]["rows"] = json::array();
  expect_error(bad, "/collectives/tables/0/rows", "non-empty");
}

TEST(CollectiveTables, LookupMatchesGpuKindAndPlacementExactly) {
  const std::vector<CollectiveTable> tables = {table()};
  EXPECT_EQ(find_collective_table(tables, "h200 141gb", OpKind::reduce_scatter, 4, 4, 1), &tables[0]);
  EXPECT_EQ(find_collective_table(tables, "H100-SXM-80GB", OpKind::reduce_scatter, 4, 4, 1), nullptr);
  EXPECT_EQ(find_collective_table(tables, "H200-141GB", OpKind::all_gather, 4, 4, 1), nullptr);
  EXPECT_EQ(find_collective_table(tables, "H200-141GB", OpKind::reduce_scatter, 4, 2, 2), nullptr);
}

TEST(CollectiveTables, AllToAllsInBlocksRoundTripApartFromTheOneBlockTable) {
  Profile p = profile_with_tables();
  CollectiveTable one = table();
  one.collective = OpKind::all_to_all;
  CollectiveTable blocks = one;
  blocks.blocks_per_peer = 16;
  p.collectives = {one, blocks};
  const json document = to_json(p);
  EXPECT_FALSE(document["collectives"]["tables"][0].contains("blocks_per_peer"));  // one block: as before them
  EXPECT_EQ(document["collectives"]["tables"][1]["blocks_per_peer"], 16);
  const Profile back = profile_from_json(document, "p.json");
  ASSERT_EQ(back.collectives.size(), 2u);
  EXPECT_EQ(back.collectives[0].blocks_per_peer, 1);
  EXPECT_EQ(back.collectives[1].blocks_per_peer, 16);
  EXPECT_EQ(find_collective_table(back.collectives, "H200-141GB", OpKind::all_to_all, 4, 4, 1), &back.collectives[0]);
  EXPECT_EQ(find_collective_table(back.collectives, "H200-141GB", OpKind::all_to_all, 4, 4, 1, 16), &back.collectives[1]);
  EXPECT_EQ(find_collective_table(back.collectives, "H200-141GB", OpKind::all_to_all, 4, 4, 1, 4), nullptr);

  json bad = document;
  bad["collectives"]["tables"][1]["blocks_per_peer"] = 0;
  expect_error(bad, "/collectives/tables/1/blocks_per_peer", "integer");
  bad = document;
  bad["collectives"]["tables"][0]["collective"] = "reduce_scatter";
  bad["collectives"]["tables"][0]["blocks_per_peer"] = 4;
  expect_error(bad, "/collectives/tables/0/blocks_per_peer", "all_to_all only");
  bad = document;
  bad["collectives"]["tables"][0]["blocks_per_peer"] = 16;
  expect_error(bad, "/collectives/tables/1", "16 block(s) per peer");
}

TEST(CollectiveTableTime, InterpolatesInsideAndFollowsTheScaledFitOutside) {
  CollectiveTable t = table();
  t.collective = OpKind::all_reduce;
  t.group_size = 2;
  t.ranks_per_node = 2;
  t.nominal_bandwidth_GBps = 100;
  t.fit = {1.0, {0.5, 0}};  // fit(S) = 2 * 1 + 1 * S / (100e3 * 0.5) us = 2 + S / 5e4
  t.points = {{100'000, 10, 0, 0}, {400'000, 20, 0, 0}, {1'600'000, 80, 0, 0}};
  EXPECT_DOUBLE_EQ(collective_fit_time_us(t, 100'000), 4);
  EXPECT_NEAR(collective_table_time_us(t, 200'000), 10 * std::sqrt(2.0), 1e-9);  // slope 1/2 segment
  EXPECT_NEAR(collective_table_time_us(t, 800'000), 40, 1e-9);                    // slope 1 segment
  EXPECT_NEAR(collective_table_time_us(t, 400'000), 20, 1e-12);
  // Beyond the ends: fit(S) / fit(end) times the end's time.
  EXPECT_NEAR(collective_table_time_us(t, 50'000), 10 * 3.0 / 4.0, 1e-9);
  EXPECT_NEAR(collective_table_time_us(t, 3'200'000), 80 * 66.0 / 34.0, 1e-9);
  EXPECT_EQ(collective_table_time_us(t, 0), 0);
}

}  // namespace
}  // namespace twin
