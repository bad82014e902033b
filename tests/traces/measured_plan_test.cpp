// Reading best.json's prediction back: every op's start and duration, class finishes and the iteration
// time, a cross-check against the lowered graph, and InputErrors that name the JSON path.
#include "traces/plan_prediction.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "reports/best_plan.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

// The plan twin simulate writes for the two-stage graph with two_stage_result()'s timings.
nlohmann::json two_stage_plan() {
  return best_plan_json(testing::small_scenario(), testing::best_candidate(), testing::two_stage_graph());
}

std::string error_path(const nlohmann::json& plan, int rank_class) {
  try {
    predicted_op_times(plan, rank_class, "run/best.json");
  } catch (const InputError& error) {
    EXPECT_EQ(error.file(), "run/best.json");
    return error.json_path();
  }
  return "no error";
}

TEST(PlanPrediction, OpTimesAreTheSimulatedStartsAndDurations) {
  const std::vector<PredictedOpTime> stage1 = predicted_op_times(two_stage_plan(), 1);
  // two_stage_result: {0,2250} {2250,3123} {3123,4000} {4000,5000} {5000,5800}
  ASSERT_EQ(stage1.size(), 5u);
  const TimeNs starts[] = {0, 2250, 3123, 4000, 5000};
  const TimeNs durations[] = {2250, 873, 877, 1000, 800};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(stage1[i].start_ns, starts[i]) << i;
    EXPECT_EQ(stage1[i].duration_ns, durations[i]) << i;
  }
  const std::vector<PredictedOpTime> stage0 = predicted_op_times(two_stage_plan(), 0);
  ASSERT_EQ(stage0.size(), 7u);
  EXPECT_EQ(stage0[3].start_ns, 5000);
  EXPECT_EQ(stage0[3].duration_ns, 1001);
}

TEST(PlanPrediction, WholePredictionMatchesTheGraph) {
  const PlanPrediction prediction = read_plan_prediction(two_stage_plan(), testing::two_stage_graph());
  EXPECT_EQ(prediction.iteration_ns, 7000);
  EXPECT_EQ(prediction.class_finish_ns, (std::vector<TimeNs>{7000, 5800}));
  ASSERT_EQ(prediction.ops.size(), 2u);
  EXPECT_EQ(prediction.ops[0].size(), 7u);
  EXPECT_EQ(prediction.ops[0][6].duration_ns, 499);
}

TEST(PlanPrediction, MalformedPlansNameTheJsonPath) {
  nlohmann::json plan = two_stage_plan();
  EXPECT_EQ(error_path(plan, 2), "/rank_classes");  // no such class

  nlohmann::json no_classes = plan;
  no_classes.erase("rank_classes");
  EXPECT_EQ(error_path(no_classes, 0), "");  // "missing required key" at the root

  nlohmann::json short_row = plan;
  short_row["rank_classes"][0]["ops"][2].erase(7);
  EXPECT_EQ(error_path(short_row, 0), "/rank_classes/0/ops/2");

  nlohmann::json negative = plan;
  negative["rank_classes"][1]["ops"][3][7] = -5;
  EXPECT_EQ(error_path(negative, 1), "/rank_classes/1/ops/3/7");

  nlohmann::json text_start = plan;
  text_start["rank_classes"][1]["ops"][0][6] = "0";
  EXPECT_EQ(error_path(text_start, 1), "/rank_classes/1/ops/0/6");

  nlohmann::json reordered = plan;
  std::swap(reordered["rank_classes"][0]["ops"][1], reordered["rank_classes"][0]["ops"][2]);
  EXPECT_EQ(error_path(reordered, 0), "/rank_classes/0/ops/1/0");

  nlohmann::json other_columns = plan;
  other_columns["op_columns"][6] = "start_ns";
  EXPECT_EQ(error_path(other_columns, 0), "/op_columns/6");

  nlohmann::json wrong_index = plan;
  wrong_index["rank_classes"][1]["index"] = 0;
  EXPECT_EQ(error_path(wrong_index, 1), "/rank_classes/1/index");

  EXPECT_EQ(error_path(nlohmann::json::array(), 0), "");
}

TEST(PlanPrediction, APlanOfAnotherGraphIsRejected) {
  IterationGraph graph = testing::two_stage_graph();
  graph.classes[1].graph[1].kind = OpKind::attention_backward;  // c1.1 differs from the plan
  try {
    read_plan_prediction(two_stage_plan(), graph, "run/best.json");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.json_path(), "/rank_classes/1/ops/1/1");
    EXPECT_NE(error.expected().find("attention_backward"), std::string::npos) << error.what();
  }

  IterationGraph one_class = testing::two_stage_graph();
  one_class.classes.pop_back();
  try {
    read_plan_prediction(two_stage_plan(), one_class, "run/best.json");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.json_path(), "/rank_classes");
  }

  IterationGraph extra_op = testing::two_stage_graph();
  extra_op.classes[0].add(testing::make_op(OpKind::elementwise, OpRole::none, Stream::compute, -1, -1));
  try {
    read_plan_prediction(two_stage_plan(), extra_op, "run/best.json");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.json_path(), "/rank_classes/0/ops");
  }

  nlohmann::json no_prediction = two_stage_plan();
  no_prediction["predicted"].erase("iteration_ns");
  try {
    read_plan_prediction(no_prediction, testing::two_stage_graph(), "run/best.json");
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.json_path(), "/predicted");
  }
}

}  // namespace
}  // namespace twin
