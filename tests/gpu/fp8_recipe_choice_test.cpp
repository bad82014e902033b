// The cast kernel of an fp8_cast op is said by the op (Op::fp8_recipe), and calibration's bench
// (calibrate/gpu/kernel_benches.hpp fp8_cast_bench_call) and the executor (executor/gpu/fp8_linears.hpp
// fp8_cast_call) choose the same one for every cast the lowering emits under each recipe: the same recipe in the
// call gpu::launch dispatches on, a delayed-scaling state in both or in neither, the same blocks (blockwise), and both
// refusing a recipe without a cast kernel. Before, calibration told the recipe by the op's bytes (a delayed cast moving what a current-scaling
// cast of another size moves was benched with the wrong kernel). Builds the calls only: no GPU needed.
#include <optional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "calibrate/gpu/kernel_benches.hpp"
#include "cost/profile.hpp"
#include "executor/gpu/fp8_linears.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin::test {
namespace {

std::optional<gpu::Fp8Cast> executor_call(const Op& op, float* state) {
  exec::DelayedScale delayed{state};
  try {
    return exec::fp8_cast_call(op.fp8_recipe, op.linear_tensor, gpu::Fp8Cast{}, &delayed, 1, nullptr);
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
}

class Fp8RecipeChoiceTest : public ::testing::TestWithParam<Fp8Recipe> {};

TEST_P(Fp8RecipeChoiceTest, CalibrationAndExecutorRunTheCastKernelTheOpSays) {
  const Fp8Recipe recipe = GetParam();
  Scenario scenario = testing::make_scenario(testing::llama_shaped(2), 1, 2048, 8);
  scenario.cluster.node_groups.front().gpu.peak_fp8_tflops = 1978.9;
  scenario.training.fp8 = Fp8Config{};
  scenario.training.fp8->recipe = recipe;
  Strategy strategy = testing::make_strategy(1, 1, 1, false);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  const RankClass& rc = lower_to_op_graphs(scenario, strategy).classes.front();
  float calibration_state = 0, executor_state = 0;  // never read: the calls are compared, not launched
  int casts = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind != OpKind::fp8_cast) continue;
    ++casts;
    EXPECT_EQ(op.fp8_recipe, recipe) << op_name(op);
    EXPECT_EQ(kernel_shape_key(op).find(",recipe=") != std::string::npos, recipe != Fp8Recipe::tensorwise);
    std::string why_not;
    const auto calibration = gpu::fp8_cast_bench_call(op, gpu::Fp8Cast{}, &calibration_state, why_not);
    const auto executor = executor_call(op, &executor_state);
    ASSERT_EQ(calibration.has_value(), executor.has_value()) << op_name(op) << ": " << why_not;
    if (!calibration) continue;
    EXPECT_EQ(calibration->recipe, recipe) << op_name(op);
    EXPECT_EQ(executor->recipe, recipe) << op_name(op);
    EXPECT_EQ(calibration->delayed_state != nullptr, recipe == Fp8Recipe::delayed) << op_name(op);
    EXPECT_EQ(executor->delayed_state != nullptr, recipe == Fp8Recipe::delayed) << op_name(op);
    EXPECT_EQ(calibration->blocks, executor->blocks) << op_name(op);
    EXPECT_EQ(calibration->blocks != kernels::Fp8Scaling::per_tensor, recipe == Fp8Recipe::blockwise) << op_name(op);
    if (recipe == Fp8Recipe::blockwise)  // DeepSeek-V3's: weights in 128 x 128 blocks, the rest 1x128
      EXPECT_EQ(calibration->blocks == kernels::Fp8Scaling::blocks_128x128, op.linear_tensor == LinearTensor::weight);
  }
  EXPECT_GT(casts, 0);
}

INSTANTIATE_TEST_SUITE_P(Recipes, Fp8RecipeChoiceTest,
                         ::testing::Values(Fp8Recipe::tensorwise, Fp8Recipe::delayed, Fp8Recipe::blockwise),
                         [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace twin::test
