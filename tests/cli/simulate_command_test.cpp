// End to end: `twin simulate` on a small scenario writes every output, deterministically, and leaves
// nothing half-written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "run_twin.hpp"

namespace twin::test {
namespace {

const char* kSmallScenario = R"({
  "name": "small llama on 3x4 H100",
  "model": { "preset": "llama2-7b", "num_layers": 8 },
  "training": { "seq_length": 2048, "global_batch_size": 24 },
  "cluster": { "nodes": [ { "count": 3, "gpu": "H100-SXM-80GB", "gpus_per_node": 4,
                            "nics": { "count": 4, "bandwidth_Gbps": 400 } } ] },
  "search": { "tensor_model_parallel_size": [1, 2, 3, 4], "pipeline_model_parallel_size": [1, 2],
              "virtual_pipeline_model_parallel_size": [1, 2], "micro_batch_size": [1, 2],
              "zero_stage": [0, 1], "recompute": ["none", "full"], "schedule": ["1f1b", "interleaved-1f1b"] }
})";

// An MoE scenario that sets no routing imbalance takes its profile's measurement for its experts and top-k,
// and the plan written says so; one that sets it keeps its own.
TEST(SimulateCommand, MoeRoutingImbalanceComesFromTheProfileWhereTheScenarioSetsNone) {
  TempDir dir("measured-routing");
  nlohmann::json profile =
      nlohmann::json::parse(read_file(std::filesystem::path(TWIN_SOURCE_DIR) / "cost/profiles/h200-x1.json"));
  const double measured = (16 * 1.25 + 48 * 1.45) / 64;
  profile["moe_routing"] = {{{"num_experts", 8}, {"top_k", 2}, {"routing_imbalance", measured},
                             {"runs", {{{"source", "trace:a"}, {"samples", 16}, {"tokens_per_micro_batch", 2048},
                                        {"imbalance_mean", 1.25}},
                                       {{"source", "trace:b"}, {"samples", 48}, {"tokens_per_micro_batch", 2048},
                                        {"imbalance_mean", 1.45}}}}}};
  write_file(dir.path / "profile.json", profile.dump());
  nlohmann::json scenario = {
      {"name", "moe"},
      {"model", {{"preset", "mixtral-8x7b"}, {"num_layers", 2}, {"hidden_size", 1024}, {"num_attention_heads", 16},
                 {"num_query_groups", 4}, {"vocab_size", 8192}, {"moe", {{"ffn_hidden_size", 1408}}}}},
      {"training", {{"seq_length", 1024}, {"global_batch_size", 4}}},
      {"cluster", {{"nodes", {{{"count", 1}, {"gpu", "H200-141GB"}, {"gpus_per_node", 1}}}}}},
      {"strategy", {{"micro_batch_size", 2}}},
      {"profile", (dir.path / "profile.json").string()}};
  write_file(dir.path / "s.json", scenario.dump());
  Outcome run = run_twin("simulate " + (dir.path / "s.json").string() + " --out " + (dir.path / "out").string() +
                         " --top 0");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("model.moe.routing_imbalance 1.400: measured for 8 experts, top-2 (2 run(s)"),
            std::string::npos) << run.output;
  auto plan = nlohmann::json::parse(read_file(dir.path / "out" / "best.json"));
  EXPECT_DOUBLE_EQ(plan["scenario"]["model"]["moe"]["routing_imbalance"].get<double>(), measured);

  scenario["model"]["moe"]["routing_imbalance"] = 1.1;
  write_file(dir.path / "s.json", scenario.dump());
  run = run_twin("simulate " + (dir.path / "s.json").string() + " --out " + (dir.path / "out2").string() + " --top 0");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("measured for 8 experts"), std::string::npos) << run.output;
  plan = nlohmann::json::parse(read_file(dir.path / "out2" / "best.json"));
  EXPECT_DOUBLE_EQ(plan["scenario"]["model"]["moe"]["routing_imbalance"].get<double>(), 1.1);
}

TEST(SimulateCommand, WritesRankingReportPlanAndTraces) {
  TempDir dir("outputs");
  write_file(dir.path / "s.json", kSmallScenario);
  Outcome run = run_twin("simulate " + (dir.path / "s.json").string() + " --out " + (dir.path / "out").string() +
                         " --top 2 --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("best: "), std::string::npos) << run.output;
  for (const char* file : {"ranking.csv", "report.html", "best.json", "megatron_args.txt"})
    EXPECT_TRUE(std::filesystem::exists(dir.path / "out" / file)) << file;
  int traces = 0, temporaries = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path / "out")) {
    traces += entry.path().parent_path().filename() == "traces" && entry.path().extension() == ".json";
    temporaries += entry.path().extension() == ".tmp";
  }
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(temporaries, 0);

  // tp 3 cannot divide 32 heads: that candidate is listed, with its reason.
  std::string csv = read_file(dir.path / "out" / "ranking.csv");
  EXPECT_NE(csv.find("num_attention_heads 32 not divisible by tensor_model_parallel_size 3"), std::string::npos);

  auto plan = nlohmann::json::parse(read_file(dir.path / "out" / "best.json"));
  EXPECT_EQ(plan["format"], "twin-plan");
  EXPECT_GT(plan["predicted"]["iteration_time_s"].get<double>(), 0.0);
  EXPECT_EQ(plan["scenario"]["model"]["num_layers"], 8);

  // The winner as Megatron-LM arguments: the same strategy best.json holds.
  std::string args = read_file(dir.path / "out" / "megatron_args.txt");
  EXPECT_EQ(args.rfind("# Megatron-LM pretrain_gpt.py arguments for twin's plan " +
                           plan["strategy_key"].get<std::string>(), 0), 0u) << args;
  const nlohmann::json& strategy = plan["strategy"];
  for (const std::string& line :
       {fmt::format("--tensor-model-parallel-size {}\n", strategy["tensor_model_parallel_size"].get<int>()),
        fmt::format("--pipeline-model-parallel-size {}\n", strategy["pipeline_model_parallel_size"].get<int>()),
        fmt::format("--micro-batch-size {}\n", strategy["micro_batch_size"].get<int>()),
        std::string("--num-layers 8\n"), std::string("--global-batch-size 24\n")})
    EXPECT_NE(args.find(line), std::string::npos) << line << args;
}

TEST(SimulateCommand, SameInputGivesSameBytesWhateverTheThreadCount) {
  TempDir dir("determinism");
  write_file(dir.path / "s.json", kSmallScenario);
  std::string scenario = (dir.path / "s.json").string();
  ASSERT_EQ(run_twin("simulate " + scenario + " --quiet --jobs 1 --out " + (dir.path / "a").string()).exit_code, 0);
  ASSERT_EQ(run_twin("simulate " + scenario + " --quiet --jobs 2 --out " + (dir.path / "b").string()).exit_code, 0);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path / "a")) {
    if (!entry.is_regular_file()) continue;
    auto relative = std::filesystem::relative(entry.path(), dir.path / "a");
    EXPECT_EQ(read_file(entry.path()), read_file(dir.path / "b" / relative)) << relative;
  }
}

// Under mpirun the processes split the search and the first writes the outputs: the same bytes as one process.
TEST(SimulateCommand, AnMpiRunWritesWhatOneProcessWrites) {
#ifndef TWIN_TEST_MPIEXEC
  GTEST_SKIP() << "twin was built without MPI";
#else
  TempDir dir("mpi");
  write_file(dir.path / "s.json", kSmallScenario);
  const std::string scenario = (dir.path / "s.json").string();
  ASSERT_EQ(run_twin("simulate " + scenario + " --quiet --out " + (dir.path / "one").string()).exit_code, 0);
  // Root in containers and CI; one host, shared memory only.
  const std::string mpirun = std::string("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ") +
                             TWIN_TEST_MPIEXEC + " -n 2 --oversubscribe --mca btl self,vader";
  const Outcome two = run_twin_under(mpirun, "simulate " + scenario + " --quiet --jobs 1 --out " + (dir.path / "two").string());
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("search split over 2 processes"), std::string::npos) << two.output;
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path / "one")) {
    if (!entry.is_regular_file()) continue;
    ++files;
    auto relative = std::filesystem::relative(entry.path(), dir.path / "one");
    EXPECT_EQ(read_file(entry.path()), read_file(dir.path / "two" / relative)) << relative;
  }
  EXPECT_GE(files, 5);
  // A scenario every process refuses: each exits with the error, none waits for the others.
  write_file(dir.path / "bad.json", "{\"name\": 1}");
  const Outcome bad = run_twin_under("timeout 60 " + mpirun, "simulate " + (dir.path / "bad.json").string() + " --out " +
                                                               (dir.path / "bad").string());
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.exit_code, 124) << "hung: " << bad.output;
  EXPECT_NE(bad.output.find("bad.json"), std::string::npos) << bad.output;
#endif
}

// Rows of ranking.csv as fields (no quoted commas in the columns read here: key, time and replay).
std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}

// Long pipelines are extrapolated from their steady state, except the top K; --full-replay replays all whole.
TEST(SimulateCommand, LongPipelinesAreExtrapolatedButTheTopKAndBestJsonAreWholeReplays) {
  TempDir dir("steady");
  const std::string scenario = std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-7b-8xH100.json";
  const std::string a = (dir.path / "a").string(), b = (dir.path / "b").string();
  ASSERT_EQ(run_twin("simulate " + scenario + " --quiet --exhaustive --top 2 --out " + a).exit_code, 0);
  ASSERT_EQ(run_twin("simulate " + scenario + " --quiet --exhaustive --top 2 --full-replay --out " + b).exit_code, 0);
  EXPECT_EQ(read_file(dir.path / "a" / "best.json"), read_file(dir.path / "b" / "best.json"));
  const auto steady = csv_rows(read_file(dir.path / "a" / "ranking.csv"));
  const auto whole = csv_rows(read_file(dir.path / "b" / "ranking.csv"));
  const auto replay_at = std::find(steady.front().begin(), steady.front().end(), "replay");
  ASSERT_NE(replay_at, steady.front().end());
  const std::size_t replay = static_cast<std::size_t>(replay_at - steady.front().begin());
  std::map<std::string, double> whole_time;
  for (std::size_t i = 1; i < whole.size(); ++i) {
    if (whole[i][0].empty()) continue;  // not ranked
    EXPECT_EQ(whole[i][replay], "whole");
    whole_time[whole[i][1]] = std::stod(whole[i][16]);
  }
  int extrapolated = 0;
  for (std::size_t i = 1; i < steady.size(); ++i) {
    if (steady[i][0].empty()) continue;
    if (i <= 2) EXPECT_EQ(steady[i], whole[i]);  // the top two: the same rows, whole replays
    if (steady[i][replay].rfind("steady state of ", 0) == 0) ++extrapolated;
    ASSERT_TRUE(whole_time.count(steady[i][1])) << steady[i][1];
    EXPECT_NEAR(std::stod(steady[i][16]), whole_time[steady[i][1]], 1e-3 * whole_time[steady[i][1]]) << steady[i][1];
  }
  EXPECT_GT(extrapolated, 100);
}

TEST(SimulateCommand, HelpExplainsEveryOption) {
  Outcome help = run_twin("simulate --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option : {"--profile", "--out", "--top", "--jobs", "--quiet", "--full-replay", "ranking.csv", "best.json"})
    EXPECT_NE(help.output.find(option), std::string::npos) << option;
}

TEST(SimulateCommand, EveryShippedScenarioRuns) {
  int ran = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TWIN_SOURCE_DIR) + "/scenarios")) {
    if (entry.path().extension() != ".json") continue;
    // The 1,024-GPU search is the search benchmark; bench_smoke runs it once.
    if (entry.path().filename() == "llama2-70b-1024xH100.json") continue;
    TempDir dir("shipped-" + entry.path().stem().string());
    Outcome run = run_twin("simulate " + entry.path().string() + " --quiet --top 1 --out " + dir.path.string());
    EXPECT_EQ(run.exit_code, 0) << entry.path() << "\n" << run.output;
    EXPECT_TRUE(std::filesystem::exists(dir.path / "best.json")) << entry.path();
    ++ran;
  }
  EXPECT_GE(ran, 5);
}

}  // namespace
}  // namespace twin::test
