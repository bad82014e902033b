// best.json: the plan's fields and per-op rows come from the candidate and graph given, it round-trips
// through read_plan to the same scenario and strategy, and broken files are InputErrors naming the path.
#include "reports/best_plan.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/error.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

// 8 GPUs, tp2 x pp2 x dp2, global batch 16 at micro-batch 1: 8 micro-batches per pipeline.
constexpr const char* kScenarioText = R"({
  "name": "plan round trip",
  "model": { "preset": "llama2-7b", "num_layers": 4 },
  "training": { "seq_length": 2048, "global_batch_size": 16, "precision": "bf16", "optimizer": "adam" },
  "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8,
                            "intra_node": { "kind": "nvswitch", "bandwidth_GBps": 450 },
                            "nics": { "count": 8, "bandwidth_Gbps": 400 } } ],
               "network": { "topology": "fat-tree", "oversubscription": 1.0 } },
  "profile": "builtin"
})";

Scenario plan_scenario() { return parse_scenario_text(kScenarioText, "plan_test.json"); }

// One folder per test and process: ctest runs these tests as parallel processes.
std::filesystem::path scratch_directory() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto directory = std::filesystem::temp_directory_path() /
                         ("twin_best_plan_test_" + std::string(test->name()) + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  return directory;
}

TEST(BestPlan, CarriesThePredictionAndEveryOp) {
  const Candidate best = testing::best_candidate();
  const nlohmann::json plan = best_plan_json(testing::small_scenario(), best, testing::two_stage_graph());
  EXPECT_EQ(plan["format"], "twin-plan");
  EXPECT_EQ(plan["version"], 1);
  EXPECT_EQ(plan["lowering_version"], kLoweringVersion);
  EXPECT_EQ(plan["strategy_key"], best.strategy.key());
  EXPECT_EQ(plan["profile"], "builtin");
  EXPECT_EQ(plan["predicted"]["iteration_ns"], 7000);
  EXPECT_EQ(plan["predicted"]["breakdown"]["bubble_ns"], 3500);
  EXPECT_EQ(plan["predicted"]["peak_memory_GiB"], (nlohmann::json{37.5, 27.5}));
  EXPECT_EQ(plan["predicted"]["memory_bytes_per_stage"][1]["activations"], 10 * static_cast<Bytes>(kGiB));
  EXPECT_EQ(plan["predicted"]["memory_bytes_per_stage"][1]["outside_allocations"],
            best.memory.per_stage[1].outside_allocations);
  EXPECT_EQ(plan["total_ops"], 12);
  ASSERT_EQ(plan["rank_classes"].size(), 2u);
  const nlohmann::json& stage1 = plan["rank_classes"][1];
  EXPECT_EQ(stage1["stage"], 1);
  EXPECT_EQ(stage1["first_rank"], 4);
  EXPECT_EQ(stage1["num_ranks"], 4);
  EXPECT_EQ(stage1["op_count"], 5);
  EXPECT_EQ(stage1["ops"][1], (nlohmann::json{"c1.1", "attention_forward", "core_attention", 1, 0, "compute", 2250, 873}));
  EXPECT_EQ(plan["rank_classes"][0]["ops"][3], (nlohmann::json{"c0.3", "gemm", "fc1", 0, 0, "compute", 5000, 1001}));
  EXPECT_EQ(plan["op_columns"].size(), 8u);
}

TEST(BestPlan, RefusesResultsWithoutOpTimings) {
  Candidate best = testing::best_candidate();
  best.result.classes[0].op_timings.clear();
  EXPECT_THROW(best_plan_json(testing::small_scenario(), best, testing::two_stage_graph()), std::invalid_argument);
}

TEST(BestPlan, RoundTripsThroughReadPlan) {
  const Scenario scenario = plan_scenario();
  Candidate best = testing::best_candidate();
  best.strategy = testing::strategy(2, 2, 2, 1, Schedule::one_f_one_b);
  const auto path = scratch_directory() / "best.json";
  write_best_plan(path, scenario, best, testing::two_stage_graph());
  EXPECT_FALSE(std::filesystem::exists(scratch_directory() / "best.json.tmp"));

  const Plan plan = read_plan(path);
  EXPECT_EQ(plan.strategy, best.strategy);
  ASSERT_TRUE(plan.scenario.strategy.has_value());
  EXPECT_EQ(*plan.scenario.strategy, best.strategy);
  EXPECT_EQ(plan.scenario.name, scenario.name);
  EXPECT_EQ(plan.scenario.model.num_layers, 4);
  EXPECT_EQ(plan.scenario.model.hidden_size, scenario.model.hidden_size);
  EXPECT_EQ(plan.scenario.training.global_batch_size, 16);
  EXPECT_EQ(plan.scenario.cluster.total_gpus(), 8);
  EXPECT_EQ(plan.profile, "builtin");
  EXPECT_EQ(plan.document["rank_classes"][0]["ops"][0][0], "c0.0");
  std::filesystem::remove_all(scratch_directory());
}

// A histogram of millions of bars would make best.json larger than twin reads back: beyond 65,536 bars it holds the
// batch the histogram gives, which gives the same batch again.
TEST(BestPlan, HoldsAHugeHistogramAsTheBatchItGives) {
  Scenario scenario = plan_scenario();
  scenario.training.seq_length = 200000;
  std::vector<SeqLengthCount> bars;
  for (std::int64_t length = 1; length <= 100000; ++length) bars.push_back({2 * length, 1 + length % 7});
  scenario.training.seq_length_histogram = bars;
  Candidate best = testing::best_candidate();
  best.strategy = testing::strategy(2, 2, 2, 1, Schedule::one_f_one_b);
  const auto path = scratch_directory() / "best.json";
  write_best_plan(path, scenario, best, testing::two_stage_graph());
  const Plan plan = read_plan(path);
  const SeqLengthHistogram& written = plan.scenario.training.seq_length_histogram;
  EXPECT_LE(written.size(), 16u);  // the batch: 16 sequences
  EXPECT_EQ(written, batch_sequences(scenario));
  EXPECT_EQ(batch_sequences(plan.scenario), batch_sequences(scenario));
  EXPECT_LT(std::filesystem::file_size(path), std::uintmax_t{1} << 20);
  std::filesystem::remove_all(scratch_directory());
}

TEST(BestPlan, WritesOneOpPerLine) {
  const auto path = scratch_directory() / "compact.json";
  write_best_plan(path, plan_scenario(), testing::best_candidate(), testing::two_stage_graph());
  std::ifstream in(path);
  std::string line;
  int op_lines = 0;
  while (std::getline(in, line))
    if (line.find("[\"c") != std::string::npos) ++op_lines;
  EXPECT_EQ(op_lines, 12);
  std::filesystem::remove_all(scratch_directory());
}

// write_best_plan writes the op rows as text, not through json values: the same bytes as the plan's json laid out.
TEST(BestPlan, WritesTheBytesOfItsJsonLaidOut) {
  const auto path = scratch_directory() / "bytes.json";
  const Candidate best = testing::best_candidate();
  const IterationGraph graph = testing::two_stage_graph();
  write_best_plan(path, plan_scenario(), best, graph);
  std::ifstream in(path, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, best_plan_text(best_plan_json(plan_scenario(), best, graph)));
  std::filesystem::remove_all(scratch_directory());
}

void expect_input_error(const std::string& text, const std::string& json_path) {
  const auto path = scratch_directory() / "bad.json";
  std::ofstream(path) << text;
  try {
    read_plan(path);
    ADD_FAILURE() << "no error for " << text;
  } catch (const InputError& error) {
    EXPECT_EQ(error.file(), path.string());
    EXPECT_EQ(error.json_path(), json_path) << error.what();
  }
}

TEST(BestPlan, BadFilesAreInputErrors) {
  EXPECT_THROW(read_plan(scratch_directory() / "missing.json"), InputError);
  expect_input_error("{ not json", "");
  expect_input_error("[1, 2]", "");
  expect_input_error(R"({"format": "something-else"})", "/format");
  nlohmann::json plan = best_plan_json(plan_scenario(), testing::best_candidate(), testing::two_stage_graph());
  plan["version"] = 2;
  expect_input_error(plan.dump(), "/version");
  plan["version"] = (std::int64_t{1} << 40) + 1;  // once read as 1 through an int
  expect_input_error(plan.dump(), "/version");
  plan["version"] = 1;
  plan["lowering_version"] = 0;
  expect_input_error(plan.dump(), "/lowering_version");
  plan["lowering_version"] = kLoweringVersion;
  plan.erase("strategy");
  expect_input_error(plan.dump(), "/strategy");
  std::filesystem::remove_all(scratch_directory());
}

}  // namespace
}  // namespace twin
