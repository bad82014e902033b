// megatron_args.txt: the exact arguments for a Llama-like and a GPT-like plan, the uneven split of Llama 3
// 405B, MoE, and what Megatron-LM cannot express (ZeRO 2/3, GPipe, double strand, family plans).
#include "reports/megatron_args.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "core/megatron_command_line.hpp"
#include "core/megatron_scenario.hpp"
#include "core/scenario.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "strategies/search.hpp"

namespace twin {
namespace {

// The pinned strategy, completed (data-parallel size and micro-batches derived) as the search completes it.
Strategy pinned(const Scenario& scenario) {
  std::vector<Candidate> candidates = enumerate_candidates(scenario);
  EXPECT_EQ(candidates.size(), 1u);
  EXPECT_TRUE(candidates.front().infeasible_reason.empty()) << candidates.front().infeasible_reason;
  return candidates.front().strategy;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The argument lines only (comments dropped), in order.
std::vector<std::string> arguments(const std::string& text) {
  std::vector<std::string> args;
  for (const std::string& line : lines_of(text))
    if (line.rfind("#", 0) != 0) args.push_back(line);
  return args;
}

std::vector<std::string> comments(const std::string& text) {
  std::vector<std::string> notes;
  for (const std::string& line : lines_of(text))
    if (line.rfind("#", 0) == 0) notes.push_back(line);
  return notes;
}

bool has_comment_with(const std::string& text, const std::string& words) {
  for (const std::string& line : comments(text))
    if (line.find(words) != std::string::npos) return true;
  return false;
}

const char* kLlamaScenario = R"({
  "name": "llama2-7b on 2x8 H100",
  "model": { "preset": "llama2-7b" },
  "training": { "seq_length": 4096, "global_batch_size": 64 },
  "cluster": { "nodes": [ { "count": 2, "gpu": "H100-SXM-80GB", "gpus_per_node": 8,
                            "nics": { "count": 8, "bandwidth_Gbps": 400 } } ] },
  "strategy": { "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2,
                "virtual_pipeline_model_parallel_size": 2, "sequence_parallel": true, "micro_batch_size": 1,
                "zero_stage": 1, "recompute": "selective", "schedule": "interleaved-1f1b" }
})";

TEST(MegatronArgs, LlamaLikeInterleavedPlan) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  std::string text = megatron_args(scenario, pinned(scenario));
  std::vector<std::string> expected = {
      "--tensor-model-parallel-size 2",
      "--pipeline-model-parallel-size 2",
      "--context-parallel-size 1",
      "--sequence-parallel",
      "--num-layers-per-virtual-pipeline-stage 8",
      "--micro-batch-size 1",
      "--global-batch-size 64",
      "--seq-length 4096",
      "--num-layers 32",
      "--hidden-size 4096",
      "--ffn-hidden-size 11008",
      "--num-attention-heads 32",
      "--kv-channels 128",
      "--max-position-embeddings 4096",
      "--position-embedding-type rope",
      "--rotary-base 10000",
      "--normalization RMSNorm",
      "--swiglu",
      "--untie-embeddings-and-output-weights",
      "--disable-bias-linear",
      "--hidden-dropout 0",
      "--attention-dropout 0",
      "--attention-backend flash",
      "--bf16",
      "--optimizer adam",
      "--lr 0.0003",
      "--min-lr 0",
      "--lr-decay-style constant",
      "--lr-warmup-iters 0",
      "--clip-grad 1",
      "--recompute-granularity selective",
      "--use-distributed-optimizer",
      "--overlap-grad-reduce",
      "--overlap-param-gather",
      "--cross-entropy-loss-fusion",
  };
  EXPECT_EQ(arguments(text), expected) << text;
  EXPECT_TRUE(has_comment_with(text, "data-parallel size 4 from the 16 ranks launched, 16 micro-batches")) << text;
  EXPECT_TRUE(has_comment_with(text, "32000 tokens")) << text;
  EXPECT_FALSE(has_comment_with(text, "Not expressible")) << text;
  EXPECT_EQ(lines_of(text).front(),
            "# Megatron-LM pretrain_gpt.py arguments for twin's plan "
            "tp2.pp2.cp1.ep1.dp4.vpp2.sp.mbs1.z1.rc-selective.interleaved-1f1b of \"llama2-7b on 2x8 H100\" (flags as "
            "NVIDIA/Megatron-LM d98e8a64ddf3 (2026-08-22) declares them).");
  EXPECT_EQ(text, megatron_args(scenario, pinned(scenario)));  // deterministic
}

const char* kGptScenario = R"({
  "name": "GPT 18.4B on 8x8 A100",
  "model": { "preset": "megatron-gpt-18.4b" },
  "training": { "seq_length": 2048, "global_batch_size": 1024, "precision": "fp16" },
  "framework": { "overlap_grad_reduce": false, "overlap_param_gather": false,
                 "gradient_accumulation_fusion": false, "cross_entropy_loss_fusion": false,
                 "attention_backend": "unfused" },
  "cluster": { "nodes": [ { "count": 8, "gpu": "A100-SXM-80GB", "gpus_per_node": 8,
                            "nics": { "count": 8, "bandwidth_Gbps": 200 } } ] },
  "strategy": { "tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 2, "sequence_parallel": false,
                "micro_batch_size": 1, "zero_stage": 0, "recompute": "full", "schedule": "1f1b" }
})";

TEST(MegatronArgs, GptLikePlan) {
  Scenario scenario = parse_scenario_text(kGptScenario, "gpt.json");
  std::string text = megatron_args(scenario, pinned(scenario));
  std::vector<std::string> expected = {
      "--tensor-model-parallel-size 8",
      "--pipeline-model-parallel-size 2",
      "--context-parallel-size 1",
      "--micro-batch-size 1",
      "--global-batch-size 1024",
      "--seq-length 2048",
      "--num-layers 40",
      "--hidden-size 6144",
      "--ffn-hidden-size 24576",
      "--num-attention-heads 48",
      "--kv-channels 128",
      "--max-position-embeddings 2048",
      "--position-embedding-type learned_absolute",
      "--normalization LayerNorm",
      "--hidden-dropout 0.1",
      "--attention-dropout 0.1",
      "--attention-backend unfused",
      "--fp16",
      "--optimizer adam",
      "--lr 0.0003",
      "--min-lr 0",
      "--lr-decay-style constant",
      "--lr-warmup-iters 0",
      "--clip-grad 1",
      "--recompute-granularity full",
      "--recompute-method uniform",
      "--recompute-num-layers 1",
      "--no-gradient-accumulation-fusion",
  };
  EXPECT_EQ(arguments(text), expected) << text;
  EXPECT_TRUE(has_comment_with(text, "data-parallel size 4 from the 64 ranks launched, 256 micro-batches")) << text;
  EXPECT_FALSE(has_comment_with(text, "Not expressible")) << text;
}

bool has_argument(const std::string& text, const std::string& argument) {
  for (const std::string& line : arguments(text))
    if (line == argument) return true;
  return false;
}

// Nemotron-4's activation is Megatron's --squared-relu, and neither GeLU (the default) nor --swiglu is named.
TEST(MegatronArgs, SquaredReluIsNamed) {
  Scenario scenario = parse_scenario_text(kGptScenario, "gpt.json");
  scenario.model.activation = Activation::squared_relu;
  const std::string text = megatron_args(scenario, pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--squared-relu")) << text;
  EXPECT_FALSE(has_argument(text, "--swiglu")) << text;
}

// 126 layers over 16 x 8 virtual stages: the first and last hold the embedding and the loss (Llama 3).
TEST(MegatronArgs, UnevenSplitCountsEmbeddingAndLossAsLayersAndZero2IsNamed) {
  Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama3-405b-16384xH100.json");
  std::string text = megatron_args(scenario, pinned(scenario));
  for (const char* argument : {"--pipeline-model-parallel-size 16", "--account-for-embedding-in-pipeline-split",
                               "--account-for-loss-in-pipeline-split", "--num-layers-per-virtual-pipeline-stage 1",
                               "--group-query-attention", "--num-query-groups 8", "--overlap-grad-reduce"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
  // ZeRO 2 is Megatron-FSDP sharding gradients and optimizer states (it turns the distributed optimizer on itself),
  // which asks for its checkpoint format and CUDA_DEVICE_MAX_CONNECTIONS unset.
  for (const char* argument : {"--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads",
                               "--ckpt-format fsdp_dtensor", "--overlap-param-gather", "--rotary-base 500000"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
  EXPECT_FALSE(has_argument(text, "--use-distributed-optimizer")) << text;
  EXPECT_FALSE(has_comment_with(text, "Not expressible")) << text;
  EXPECT_TRUE(has_comment_with(text, "Use: env -u CUDA_DEVICE_MAX_CONNECTIONS torchrun")) << text;
}

TEST(MegatronArgs, OneMissingLayerCountsOnlyTheLoss) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.model.num_layers = 31;  // 4 virtual stages of 8, the last holding 7
  std::string text = megatron_args(scenario, pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--account-for-loss-in-pipeline-split")) << text;
  EXPECT_FALSE(has_argument(text, "--account-for-embedding-in-pipeline-split")) << text;
  EXPECT_TRUE(has_argument(text, "--num-layers-per-virtual-pipeline-stage 8")) << text;
}

// A stated layout goes to Megatron alone (validate_args refuses it beside the per-virtual-stage flags), as written;
// the MTP depths with it. The file reads back to the same layout.
TEST(MegatronArgs, StatedLayoutAndMtpDepthsArePassedOn) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.model.mtp_num_layers = 1;
  std::string error;
  scenario.strategy->pipeline_model_parallel_layout = *parse_pipeline_layout("Et*7|t*8|t*8|t*9mL", error);
  const std::string text = megatron_args(scenario, pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--pipeline-model-parallel-layout Et*7|t*8|t*8|t*9mL")) << text;
  EXPECT_TRUE(has_argument(text, "--mtp-num-layers 1")) << text;
  for (const std::string& line : arguments(text))
    for (const char* absent : {"--num-layers-per-virtual-pipeline-stage", "--account-for-loss-in-pipeline-split",
                               "--account-for-embedding-in-pipeline-split"})
      EXPECT_NE(line.rfind(absent, 0), 0u) << line << "\n" << text;
}

TEST(MegatronArgs, MoeWithExpertAndContextParallelism) {
  Scenario scenario = parse_scenario_text(R"({
    "name": "mixtral on 4x8 H100",
    "model": { "preset": "mixtral-8x7b", "moe": { "routing_imbalance": 1.25 } },
    "training": { "seq_length": 8192, "global_batch_size": 64 },
    "framework": { "cp_comm_type": "all_gather", "tp_comm_overlap": true },
    "cluster": { "nodes": [ { "count": 4, "gpu": "H100-SXM-80GB", "gpus_per_node": 8,
                              "nics": { "count": 8, "bandwidth_Gbps": 400 } } ] },
    "strategy": { "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 4, "context_parallel_size": 2,
                  "expert_model_parallel_size": 4, "sequence_parallel": true, "micro_batch_size": 1,
                  "zero_stage": 1, "recompute": "full", "schedule": "1f1b" }
  })", "mixtral.json");
  std::string text = megatron_args(scenario, pinned(scenario));
  for (const char* argument :
       {"--expert-model-parallel-size 4", "--expert-tensor-parallel-size 1", "--context-parallel-size 2",
        "--cp-comm-type allgather", "--sequence-parallel", "--tp-comm-overlap", "--num-experts 8",
        "--moe-router-topk 2", "--moe-ffn-hidden-size 14336", "--moe-token-dispatcher-type alltoall",
        "--moe-grouped-gemm", "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 1e-2",
        "--rotary-base 1000000",
        "--group-query-attention", "--num-query-groups 8", "--max-position-embeddings 32768"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
  EXPECT_TRUE(has_comment_with(text, "routing imbalance 1.25")) << text;
  EXPECT_FALSE(has_argument(text, "--moe-router-force-load-balancing")) << text;
  // Forced balance and loss-free bias are Megatron switches; the all-gather dispatcher its type.
  scenario.model.moe.routing_imbalance.reset();
  scenario.model.moe.routing.emplace().distribution = RoutingDistribution::forced;
  scenario.framework.moe_token_dispatcher_type = MoeTokenDispatcher::allgather;
  text = megatron_args(scenario, pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--moe-router-force-load-balancing")) << text;
  EXPECT_TRUE(has_argument(text, "--moe-token-dispatcher-type allgather")) << text;
  scenario.model.moe.routing.emplace().distribution = RoutingDistribution::loss_free;
  text = megatron_args(scenario, pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--moe-router-enable-expert-bias")) << text;
  EXPECT_TRUE(has_comment_with(text, "routing loss_free")) << text;
  // Capacity and padding, the overlapped EP schedule and its delayed weight gradients: Megatron's flags.
  // (The strategy as pinned above: the flags are written as the scenario says, validity.cpp holds them to it.)
  EXPECT_FALSE(has_argument(text, "--overlap-moe-expert-parallel-comm")) << text;
  const Strategy strategy = pinned(scenario);
  scenario.model.moe.expert_capacity_factor = 1.25;
  scenario.model.moe.pad_expert_input_to_capacity = true;
  scenario.framework.overlap_moe_expert_parallel_comm = scenario.framework.delay_wgrad_compute = true;
  text = megatron_args(scenario, strategy);
  for (const char* argument : {"--moe-expert-capacity-factor 1.25", "--moe-pad-expert-input-to-capacity",
                               "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
}

// Expert TP is written for every MoE plan (Megatron's default is the TP size, twin's 1), and read back.
TEST(MegatronArgs, ExpertTensorParallelSizeIsWrittenAndReadBack) {
  const Scenario scenario = parse_scenario_text(R"({
    "name": "small moe",
    "model": { "preset": "mixtral-8x7b", "num_layers": 4 },
    "training": { "seq_length": 4096, "global_batch_size": 32 },
    "framework": { "moe_token_dispatcher_type": "alltoall" },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8 } ] },
    "strategy": { "tensor_model_parallel_size": 2, "expert_model_parallel_size": 2, "expert_tensor_parallel_size": 2,
                  "sequence_parallel": true, "micro_batch_size": 1 }
  })", "moe.json");
  const Strategy strategy = pinned(scenario);
  EXPECT_EQ(strategy.expert_tensor_parallel_size, 2);
  const std::string text = megatron_args(scenario, strategy);
  EXPECT_TRUE(has_argument(text, "--expert-tensor-parallel-size 2")) << text;
  const MegatronScenario read =
      scenario_from_megatron_command_line(scenario, parse_megatron_command_line(text, "args"), "args");
  EXPECT_EQ(read.scenario.strategy->expert_tensor_parallel_size, 2);
  EXPECT_EQ(arguments(megatron_args(read.scenario, pinned(read.scenario))), arguments(text));
}

TEST(MegatronArgs, TensorParallelOneDropsSequenceParallelAndItsOverlap) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.framework.tp_comm_overlap = true;
  Strategy s = pinned(scenario);
  s.tensor_model_parallel_size = 1;  // Megatron turns sequence parallelism off at TP 1
  s.data_parallel_size = 8;
  std::string text = megatron_args(scenario, s);
  EXPECT_FALSE(has_argument(text, "--sequence-parallel")) << text;
  EXPECT_FALSE(has_argument(text, "--tp-comm-overlap")) << text;
}

TEST(MegatronArgs, ScatterGatherOfPipelineTensorsIsNamedWhereItActs) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.framework.scatter_gather_tensors_in_pipeline = true;
  Strategy s = pinned(scenario);
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
  Strategy s = pinned(scenario);
  s.zero_stage = 1;
  const std::string text = megatron_args(scenario, s);
  EXPECT_TRUE(has_comment_with(text, "Not expressible: deepspeed_bf16_optimizer")) << text;
  EXPECT_TRUE(has_argument(text, "--use-distributed-optimizer")) << text;  // the closest Megatron-LM has
}

TEST(MegatronArgs, ScheduleMegatronLacksIsNamedAndTheRestGiven) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  Strategy s = pinned(scenario);
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
  Strategy s = pinned(scenario);
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
  const std::string text = megatron_args(scenario, pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--max-position-embeddings 16384")) << text;
  EXPECT_TRUE(has_argument(text, "--seq-length 16384")) << text;
}

// A static-packed plan is one strategy over packed rows: its arguments, not "no arguments".
TEST(MegatronArgs, StaticPackedPlanGivesItsStrategysArguments) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  Candidate candidate;
  candidate.strategy = pinned(scenario);
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
  candidate.strategy = pinned(scenario);
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
  EXPECT_FALSE(has_argument(megatron_args(scenario, pinned(scenario)), "--use-precision-aware-optimizer"));
  scenario.training.optimizer_precision = {StateDtype::fp16, StateDtype::bf16, StateDtype::fp32};
  std::string text = megatron_args(scenario, pinned(scenario));
  for (const char* argument : {"--use-precision-aware-optimizer", "--main-params-dtype fp16", "--exp-avg-dtype bf16"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
  EXPECT_FALSE(has_argument(text, "--exp-avg-sq-dtype fp32")) << text;
  scenario.training.optimizer_precision.main_params = StateDtype::bf16;  // no master copy: not Megatron's
  text = megatron_args(scenario, pinned(scenario));
  EXPECT_TRUE(has_comment_with(text, "main_params_dtype bf16")) << text;
  EXPECT_FALSE(has_argument(text, "--main-params-dtype bf16")) << text;
}

TEST(MegatronArgs, ALineBreakInTheNameStaysInsideTheComment) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.name = "two\nlines --fp16\r";
  std::string text = megatron_args(scenario, pinned(scenario));
  for (const std::string& line : lines_of(text))
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("--", 0) == 0) << line;
  EXPECT_FALSE(has_argument(text, "--fp16"));
}

}  // namespace
}  // namespace twin
