// megatron_args.txt beside what Megatron-LM cannot express or asks for: framework switches, schedules, the
// environment line, packed and family plans, the optimizer's precision, names with line breaks.
#include "reports/megatron_args.hpp"

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "strategies/search.hpp"

#include "tests/reports/megatron_args_fixture.hpp"

namespace twin {
namespace {

using testing::arguments;
using testing::comments;
using testing::has_argument;
using testing::has_comment_with;
using testing::kLlamaScenario;
using testing::kGptScenario;
using testing::lines_of;

TEST(MegatronArgs, TensorParallelOneDropsSequenceParallelAndItsOverlap) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.framework.tp_comm_overlap = true;
  Strategy s = testing::pinned(scenario);
  s.tensor_model_parallel_size = 1;  // Megatron turns sequence parallelism off at TP 1
  s.data_parallel_size = 8;
  std::string text = megatron_args(scenario, s);
  EXPECT_FALSE(has_argument(text, "--sequence-parallel")) << text;
  EXPECT_FALSE(has_argument(text, "--tp-comm-overlap")) << text;
}

TEST(MegatronArgs, ScatterGatherOfPipelineTensorsIsNamedWhereItActs) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.framework.scatter_gather_tensors_in_pipeline = true;
  Strategy s = testing::pinned(scenario);
  ASSERT_GT(s.tensor_model_parallel_size, 1);
  ASSERT_GT(s.pipeline_model_parallel_size, 1);
  s.sequence_parallel = false;
  const std::string scattered = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(scattered, "Not expressible: scatter_gather_tensors_in_pipeline")) << scattered;
  s.sequence_parallel = true;  // the tensors between stages are each rank's share already: nothing to say
  EXPECT_FALSE(has_comment_with(megatron_args(scenario, s), "scatter_gather")) << megatron_args(scenario, s);
}

TEST(MegatronArgs, DeepSpeedBf16OptimizerIsNamedAtZeroStageOne) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.framework.deepspeed_bf16_optimizer = true;
  Strategy s = testing::pinned(scenario);
  s.zero_stage = 1;
  const std::string text = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(text, "Not expressible: deepspeed_bf16_optimizer")) << text;
  EXPECT_TRUE(has_argument(text, "--use-distributed-optimizer")) << text;  // the closest Megatron-LM has
}

TEST(MegatronArgs, AnEarlyStoppingCheckpointIsNamedUnderFullRecompute) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.framework.checkpoint_early_stop = true;
  Strategy s = testing::pinned(scenario);
  s.recompute = Recompute::full;
  const std::string text = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(text, "Not expressible: checkpoint_early_stop")) << text;
  EXPECT_NE(text.find("--recompute-granularity full"), std::string::npos) << text;  // the full recompute Megatron has
  s.recompute = Recompute::none;  // nothing recomputed: nothing to say
  EXPECT_FALSE(has_comment_with(megatron_args(scenario, s), "checkpoint_early_stop")) << megatron_args(scenario, s);
}

// A plan priced as PyTorch's FSDP (either) says that its arguments run the layout in Megatron-LM's kernels.
TEST(MegatronArgs, APytorchFsdpPlanSaysMegatronRunsItsLayoutWithOtherKernels) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  const Strategy s = testing::pinned(scenario);
  EXPECT_FALSE(has_comment_with(megatron_args(scenario, s), "framework.name")) << megatron_args(scenario, s);
  for (FrameworkName name : {FrameworkName::pytorch_fsdp2, FrameworkName::pytorch_fsdp}) {
    scenario.framework.name = name;
    const std::string text = megatron_args(scenario, s);
    EXPECT_TRUE(has_comment_with(text, "Not expressible: framework.name " + std::string(to_string(name)))) << text;
    EXPECT_TRUE(has_comment_with(text, "eager PyTorch's kernels, its host time")) << text;
  }
  // The kernels the plan priced: torch.compile's, or Transformer Engine's under FSDP (framework.transformer_engine_kernels).
  scenario.framework.compile = true;
  EXPECT_TRUE(has_comment_with(megatron_args(scenario, s), "torch.compile's kernels, PyTorch's host time"));
  scenario.framework.compile = false;
  scenario.framework.transformer_engine_kernels = true;
  EXPECT_TRUE(has_comment_with(megatron_args(scenario, s), "Transformer Engine's kernels, eager PyTorch's host time"));
}

TEST(MegatronArgs, ScheduleMegatronLacksIsNamedAndTheRestGiven) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  Strategy s = testing::pinned(scenario);
  s.virtual_pipeline_model_parallel_size = 1;
  s.schedule = Schedule::gpipe;
  std::string gpipe = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(gpipe, "Not expressible: the GPipe schedule")) << gpipe;
  EXPECT_TRUE(has_argument(gpipe, "--pipeline-model-parallel-size 2")) << gpipe;
  EXPECT_FALSE(has_argument(gpipe, "--num-layers-per-virtual-pipeline-stage 8")) << gpipe;

  s.schedule = Schedule::double_strand;
  std::string strands = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(strands, "Not expressible: the double-strand schedule")) << strands;
  EXPECT_TRUE(has_argument(strands, "--tensor-model-parallel-size 2")) << strands;
  EXPECT_FALSE(has_comment_with(strands, "GPipe")) << strands;

  s.schedule = Schedule::one_f_one_b;
  s.zero_stage = 3;
  std::string zero3 = megatron_args(scenario, s);
  EXPECT_TRUE(has_argument(zero3, "--data-parallel-sharding-strategy optim_grads_params")) << zero3;
  EXPECT_FALSE(has_argument(zero3, "--use-distributed-optimizer")) << zero3;
  EXPECT_FALSE(has_comment_with(zero3, "--use-custom-fsdp")) << zero3;  // gone from Megatron-LM

  scenario.framework.zero_implementation = ZeroImplementation::deepspeed;  // DeepSpeed's ZeRO-3: not Megatron's
  zero3 = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(zero3, "Not expressible: ZeRO stage 3 as DeepSpeed ran it")) << zero3;
  EXPECT_FALSE(has_argument(zero3, "--use-megatron-fsdp")) << zero3;
  EXPECT_TRUE(has_comment_with(zero3, "Use: CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun")) << zero3;
}

// The environment Megatron asks for: one hardware queue with TP or CP, none set on one GPU of each kind.
TEST(MegatronArgs, UseLineSetsTheEnvironmentMegatronAsksFor) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  Strategy s = testing::pinned(scenario);
  EXPECT_TRUE(has_comment_with(megatron_args(scenario, s), "Use: CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ..."));
  s.tensor_model_parallel_size = 1;
  s.data_parallel_size = 8;
  const std::string plain = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(plain, "Use: torchrun ... pretrain_gpt.py $(grep -v '^#' megatron_args.txt)")) << plain;
  s.context_parallel_size = 2;
  s.data_parallel_size = 4;
  EXPECT_TRUE(has_comment_with(megatron_args(scenario, s), "Use: CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun"));
}

// Long-context plans of a model trained at a shorter context: Megatron requires max positions >= the sequence; with
// RoPE they size no weight, so the sequence is given.
TEST(MegatronArgs, MaxPositionEmbeddingsCoverTheSequence) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.training.seq_length = 16384;
  const std::string text = megatron_args(scenario, testing::pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--max-position-embeddings 16384")) << text;
  EXPECT_TRUE(has_argument(text, "--seq-length 16384")) << text;
}

// A static-packed plan is one strategy over packed rows: its arguments, not "no arguments".
TEST(MegatronArgs, StaticPackedPlanGivesItsStrategysArguments) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  Candidate candidate;
  candidate.strategy = testing::pinned(scenario);
  auto packed = std::make_shared<HotSwitchPlan>();
  packed->phases.resize(1);
  packed->phases[0].strategy = candidate.strategy;
  packed->phases[0].workload.max_length = 8192;
  packed->phases[0].workload.sequences = 100;
  packed->phases[0].packs = 64;
  candidate.plan = packed;
  const std::string text = megatron_args(scenario, candidate);
  EXPECT_FALSE(has_comment_with(text, "No arguments")) << text;
  EXPECT_TRUE(has_comment_with(text, "static-packed:")) << text;
  EXPECT_TRUE(has_comment_with(text, "100 sequences packed into 64 rows of up to 8192 tokens")) << text;
  for (const char* argument : {"--seq-length 8192", "--global-batch-size 64", "--tensor-model-parallel-size 2"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
}

TEST(MegatronArgs, FamilyPlanGivesOnlyCommentsSayingWhy) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  Candidate candidate;
  candidate.strategy = testing::pinned(scenario);
  auto hot = std::make_shared<HotSwitchPlan>();
  hot->phases.resize(2);
  hot->phases[0].workload.max_length = 8192;
  hot->phases[1].workload.min_exclusive = 8192;
  hot->phases[1].workload.max_length = 32768;
  candidate.plan = hot;
  std::string text = megatron_args(scenario, candidate);
  EXPECT_TRUE(arguments(text).empty()) << text;
  EXPECT_TRUE(has_comment_with(text, "Not expressible: the winning plan is a hot-switch plan")) << text;
  EXPECT_TRUE(has_comment_with(text, "The plan: 2 phases: (0,8192] ")) << text;

  candidate.plan = std::make_shared<AsymmetricPlan>();
  EXPECT_TRUE(has_comment_with(megatron_args(scenario, candidate), "HexiScale"));
  candidate.plan = std::make_shared<PerLayerPlan>();
  EXPECT_TRUE(has_comment_with(megatron_args(scenario, candidate), "Galvatron"));

  candidate.plan.reset();  // a uniform candidate: its strategy's arguments
  EXPECT_EQ(megatron_args(scenario, candidate), megatron_args(scenario, candidate.strategy));
}

TEST(MegatronArgs, OptimizerPrecisionTurnsOnThePrecisionAwareOptimizer) {
  Scenario scenario = parse_scenario_text(kGptScenario, "gpt.json");
  EXPECT_FALSE(has_argument(megatron_args(scenario, testing::pinned(scenario)), "--use-precision-aware-optimizer"));
  scenario.training.optimizer_precision = {StateDtype::fp16, StateDtype::bf16, StateDtype::fp32};
  std::string text = megatron_args(scenario, testing::pinned(scenario));
  for (const char* argument : {"--use-precision-aware-optimizer", "--main-params-dtype fp16", "--exp-avg-dtype bf16"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
  EXPECT_FALSE(has_argument(text, "--exp-avg-sq-dtype fp32")) << text;
  scenario.training.optimizer_precision.main_params = StateDtype::bf16;  // no master copy: not Megatron's
  text = megatron_args(scenario, testing::pinned(scenario));
  EXPECT_TRUE(has_comment_with(text, "main_params_dtype bf16")) << text;
  EXPECT_FALSE(has_argument(text, "--main-params-dtype bf16")) << text;
}

TEST(MegatronArgs, ALineBreakInTheNameStaysInsideTheComment) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.name = "two\nlines --fp16\r";
  std::string text = megatron_args(scenario, testing::pinned(scenario));
  for (const std::string& line : lines_of(text))
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("--", 0) == 0) << line;
  EXPECT_FALSE(has_argument(text, "--fp16"));
}

}  // namespace
}  // namespace twin
