// The run folder's files, written from measured times without a GPU: a rank's file reads back as written,
// and rank 0's summary joins the ranks as twin execute does (a step lasts as long as its slowest rank,
// warm-up steps are not measured), giving a recorded run's numbers back from its step times.
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/attention_scratch.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "core/moe_routing.hpp"
#include "executor/run_report.hpp"
#include "strategies/memory.hpp"
#include "tests/cli/run_twin.hpp"
#include "tests/reports/execution_fixture.hpp"
#include "tests/traces/measured_kernels.hpp"

namespace twin::exec {
namespace {

using nlohmann::json;

json read_json(const std::filesystem::path& path) { return json::parse(test::read_file(path)); }

// JSON has no NaN: a step whose loss diverged is written as null and reads back as NaN, so the run still has a report
// (on 2026-11-29 a block-wise FP8 run's NaN at step 24 ended twin execute with "type must be number, but is null").
TEST(RunReport, ADivergedStepReadsBackAsNaN) {
  test::TempDir dir("run-report-nan");
  RankRun run;
  run.device = "NVIDIA H200";
  run.losses = {9.5, std::numeric_limits<double>::quiet_NaN()};
  run.grad_norms = {1.5, std::numeric_limits<double>::infinity()};
  run.iteration_s = {0.125, 0.0625};
  write_rank_run(dir.path, run, RankClass{}, 1);
  const RankRun back = read_rank_run(dir.path / "measured" / "rank0.json");
  ASSERT_EQ(back.losses.size(), 2u);
  EXPECT_EQ(back.losses[0], 9.5);
  EXPECT_TRUE(std::isnan(back.losses[1]));
  ASSERT_EQ(back.grad_norms.size(), 2u);
  EXPECT_TRUE(std::isnan(back.grad_norms[1]));  // JSON has no infinity either
}

// A run's rank file is what a scenario's measured routing names (model.moe.routing {"distribution": "measured",
// "histogram": "measured/rank0.json"}): the expert loads as twin execute writes them read back per layer, summed over
// the micro-batches. Until 2026-12-02 the reader took only an array of entries, which twin execute never wrote: every
// run's file was refused ("at /expert_loads: expected a non-empty array, got an object").
TEST(RunReport, ARanksExpertLoadsAreAMeasuredRoutingHistogram) {
  test::TempDir dir("run-report-routing");
  RankRun run;
  run.device = "NVIDIA H200";
  run.losses = {9.5};
  run.iteration_s = {0.125};
  run.expert_loads = {{1, 0, 3, {5, 0, 7, 4}}, {1, 1, 3, {4, 4, 4, 4}}, {1, 0, 0, {1, 2, 3, 10}}};
  write_rank_run(dir.path, run, RankClass{}, 0);
  const nlohmann::json value = {{"distribution", "measured"}, {"histogram", "measured/rank0.json"}};
  const RoutingModel routing = parse_routing(JsonReader(value, "s.json", "/model/moe/routing"), 4, dir.path);
  ASSERT_EQ(routing.histograms.size(), 2u);
  EXPECT_EQ(routing.histograms[0].layer, 0);
  EXPECT_EQ(routing.histograms[0].tokens_per_expert, (std::vector<std::int64_t>{1, 2, 3, 10}));
  EXPECT_EQ(routing.histograms[1].layer, 3);
  EXPECT_EQ(routing.histograms[1].tokens_per_expert, (std::vector<std::int64_t>{9, 4, 11, 8}));
  try {  // a model of another expert count: refused at the sample's path
    parse_routing(JsonReader(value, "s.json", "/model/moe/routing"), 8, dir.path);
    ADD_FAILURE() << "expected a refusal";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("expected 8 counts"), std::string::npos) << error.what();
  }
}

TEST(RunReport, ARanksFileReadsBackAsWritten) {
  test::TempDir dir("run-report-rank");
  const IterationGraph graph = testing::two_stage_graph();
  RankRun run;
  run.rank = 2;
  run.rank_class = 0;
  run.coordinates = {2, 0, 0, 0};
  run.device = "NVIDIA H200";
  run.losses = {9.5, 8.25};
  run.iteration_s = {0.125, 0.0625};
  run.peak_memory_bytes = 123456789;
  run.dropped_records = 3;
  run.kernels = testing::stage0_kernels();  // repeated names (interned in the file) and a kernel outside any op
  run.expert_loads = {{1, 0, 3, {5, 0, 7, 4}}, {1, 1, 3, {4, 4, 4, 4}}};
  run.aux_losses = {0.0125, 0.0101};
  run.switch_s = {0.0041, 0.0032};
  write_rank_run(dir.path, run, graph.classes[0], 1);

  const RankRun back = read_rank_run(dir.path / "measured" / "rank2.json");
  EXPECT_EQ(back.rank, 2);
  EXPECT_EQ(back.coordinates, run.coordinates);
  EXPECT_EQ(back.device, run.device);
  EXPECT_EQ(back.losses, run.losses);
  EXPECT_EQ(back.iteration_s, run.iteration_s);
  EXPECT_EQ(back.peak_memory_bytes, run.peak_memory_bytes);
  EXPECT_EQ(back.dropped_records, 3u);
  ASSERT_EQ(back.kernels.size(), run.kernels.size());
  for (std::size_t i = 0; i < run.kernels.size(); ++i) {
    EXPECT_EQ(back.kernels[i].name, run.kernels[i].name) << i;
    EXPECT_EQ(back.kernels[i].start_ns, run.kernels[i].start_ns) << i;
    EXPECT_EQ(back.kernels[i].end_ns, run.kernels[i].end_ns) << i;
    EXPECT_EQ(back.kernels[i].stream_id, run.kernels[i].stream_id) << i;
    EXPECT_EQ(back.kernels[i].iteration, run.kernels[i].iteration) << i;
    EXPECT_EQ(back.kernels[i].op, run.kernels[i].op) << i;
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path / "traces" / "measured_rank2.json"));
  ASSERT_EQ(back.expert_loads.size(), 2u);
  EXPECT_EQ(back.expert_loads[0].tokens_per_expert, run.expert_loads[0].tokens_per_expert);
  EXPECT_EQ(back.expert_loads[1].micro_batch, 1);
  EXPECT_EQ(back.expert_loads[1].layer, 3);
  EXPECT_EQ(back.aux_losses, run.aux_losses);
  EXPECT_EQ(back.switch_s, run.switch_s);
}

// The busiest expert over the mean: 7 of 16 copies over 4 experts is 1.75 times the mean of 4.
TEST(RunReport, RoutingImbalanceIsTheBusiestExpertOverTheMean) {
  EXPECT_DOUBLE_EQ(routing_imbalance({0, 0, 0, {5, 0, 7, 4}}), 1.75);
  EXPECT_DOUBLE_EQ(routing_imbalance({0, 0, 0, {4, 4, 4, 4}}), 1.0);
  EXPECT_DOUBLE_EQ(routing_imbalance({0, 0, 0, {0, 0}}), 1.0);
}

TEST(RunReport, RefusesAFileThatIsNotARanksMeasurements) {
  test::TempDir dir("run-report-refuse");
  const std::filesystem::path path = dir.path / "rank0.json";
  test::write_file(path, R"({"format": "twin-execute-run"})");
  try {
    read_rank_run(path);
    FAIL() << "read a run summary as a rank's measurements";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(path.string()), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("twin-measured-rank"), std::string::npos) << error.what();
  }
}

// small-single-h200 was run on one GPU; its recorded step times and losses, written as rank 0's file,
// give the recorded summary back.
TEST(RunReport, TheSummaryOfARecordedRunComesBackFromItsStepTimes) {
  test::TempDir dir("run-report-recorded");
  const std::filesystem::path fixture = testing::executed_fixture("small-single-h200");
  const Plan plan = read_plan(fixture / "best.json");
  const json recorded = read_json(fixture / "metrics.json");
  const int warmup = recorded.at("warmup_iterations");
  RankRun run;
  run.device = recorded.at("device");
  for (const json& step : recorded.at("steps")) {
    run.losses.push_back(step.at("loss"));
    run.iteration_s.push_back(step.at("iteration_s"));
  }
  write_rank_run(dir.path, run, RankClass{}, warmup);
  write_run_summary(dir.path, plan, plan_graphs(plan, "best.json"), 1, warmup, "kernels");

  const json written = read_json(dir.path / "metrics.json");
  EXPECT_DOUBLE_EQ(written.at("measured").at("iteration_s"), recorded.at("measured").at("iteration_s"));
  EXPECT_NEAR(written.at("measured").at("tokens_per_s"), recorded.at("measured").at("tokens_per_s"), 1e-6);
  EXPECT_EQ(written.at("loss_first"), recorded.at("loss_first"));
  EXPECT_EQ(written.at("loss_last"), recorded.at("loss_last"));
  EXPECT_EQ(written.at("predicted"), recorded.at("predicted"));
  EXPECT_EQ(written.at("strategy"), recorded.at("strategy"));
  ASSERT_EQ(written.at("steps").size(), recorded.at("steps").size());
  for (std::size_t i = 0; i < recorded.at("steps").size(); ++i)
    EXPECT_EQ(written["steps"][i]["measured"], recorded["steps"][i]["measured"]) << "step " << i + 1;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "ops.csv"));  // no kernels traced, no op table
  // What the measured peak counts: the device total less the CUDA context (one GPU: no NCCL communicator).
  const json& rank = written.at("ranks").at(0);
  EXPECT_DOUBLE_EQ(rank.at("predicted_peak_memory_GiB").get<double>() - rank.at("predicted_allocated_peak_GiB").get<double>(),
                   kCudaContextBytes / kGiB);
}

// The memory model's peak stands for the default attention engine's scratch; a run of cuDNN's deterministic engine
// is compared with it plus that engine's larger scratch (core/attention_scratch.hpp: the bf16 scores' gradient of
// the plan's largest fused attention backward), and a run of the kernels, which need less, with the model's alone.
TEST(RunReport, ThePredictedPeakCountsTheDeterministicAttentionsScratch) {
  test::TempDir dir("run-report-attention-scratch");
  const std::filesystem::path fixture = testing::executed_fixture("small-single-h200");
  const Plan plan = read_plan(fixture / "best.json");
  const PlanGraphs lowered = plan_graphs(plan, "best.json");
  RankRun run;
  run.device = "H200";
  run.losses = {2.0, 1.0};
  run.iteration_s = {0.1, 0.1};
  write_rank_run(dir.path, run, RankClass{}, 1);
  const auto rank_after = [&](const std::string& attention) {
    write_run_summary(dir.path, plan, lowered, 1, 1, attention);
    return read_json(dir.path / "metrics.json").at("ranks").at(0);
  };
  const json kernels = rank_after("kernels"), deterministic = rank_after("cudnn-deterministic");
  Bytes expected = 0;
  for (const RankClass& rc : lowered.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).kind == OpKind::attention_backward)
        expected = std::max(expected, attention_backward_scratch_bytes(AttentionImplementation::cudnn_deterministic,
                                                                       rc.op(i).attention) -
                                          attention_backward_scratch_bytes(AttentionImplementation::cudnn,
                                                                           rc.op(i).attention));
  ASSERT_GT(expected, 0);
  EXPECT_DOUBLE_EQ(kernels.at("attention_engine_scratch_GiB").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(deterministic.at("attention_engine_scratch_GiB").get<double>(), double(expected) / kGiB);
  EXPECT_NEAR(deterministic.at("predicted_allocated_peak_GiB").get<double>() -
                  kernels.at("predicted_allocated_peak_GiB").get<double>(),
              double(expected) / kGiB, 1e-12);
}

TEST(RunReport, AStepLastsAsLongAsItsSlowestRank) {
  test::TempDir dir("run-report-slowest");
  const Plan plan = read_plan(testing::executed_fixture("small-single-h200") / "best.json");
  const std::vector<std::vector<double>> iteration_s = {{0.5, 0.2, 0.3, 0.4}, {0.4, 0.25, 0.1, 0.6}};
  for (int rank = 0; rank < 2; ++rank) {
    RankRun run;
    run.rank = rank;
    run.device = "NVIDIA H200";
    run.losses = {4, 3, 2, 1};
    run.iteration_s = iteration_s[rank];
    run.learning_rates = {0, 1e-4, 2e-4, 3e-4};
    run.grad_norms = {6.5, 3.25, 2, 1};
    if (rank == 1) run.switch_s = {0.9, 0.02, 0.04, 0.03};  // a part that switches into its layout
    write_rank_run(dir.path, run, RankClass{}, 1);
  }
  write_run_summary(dir.path, plan, plan_graphs(plan, "best.json"), 2, 1, "kernels");

  const std::string steps = test::read_file(dir.path / "steps.csv");
  EXPECT_EQ(steps.substr(0, steps.find('\r')), "step,loss,iteration_s,tokens_per_s,mfu,measured,lr,grad_norm");
  for (const char* row : {"\n1,4.000000,0.500000,", "\n2,3.000000,0.250000,", "\n3,2.000000,0.300000,",
                          "\n4,1.000000,0.600000,"})
    EXPECT_NE(steps.find(row), std::string::npos) << row << " in\n" << steps;
  EXPECT_NE(steps.find(",false,0,6.5\r\n2,"), std::string::npos) << "the warm-up step is not measured:\n" << steps;
  EXPECT_NE(steps.find(",true,0.0001,3.25\r\n3,"), std::string::npos) << "learning rate and norm:\n" << steps;
  const json written = read_json(dir.path / "metrics.json");
  EXPECT_DOUBLE_EQ(written.at("measured").at("iteration_s"), 0.3);  // median of 0.25, 0.3, 0.6
  EXPECT_EQ(written.at("world_size"), 2);
  EXPECT_DOUBLE_EQ(written.at("ranks")[1].at("median_iteration_s"), 0.25);  // 0.25, 0.1, 0.6
  // The switch: the median of the measured iterations; predicted from the plan's transfer ops (none here).
  EXPECT_FALSE(written.at("ranks")[0].contains("switch"));
  EXPECT_DOUBLE_EQ(written.at("ranks")[1].at("switch").at("median_s"), 0.03);
  EXPECT_DOUBLE_EQ(written.at("ranks")[1].at("switch").at("predicted_s"), 0.0);
}

}  // namespace
}  // namespace twin::exec
