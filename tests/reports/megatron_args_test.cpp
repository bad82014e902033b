// megatron_args.txt: the exact arguments for a Llama-like and a GPT-like plan, the uneven split of Llama 3
// 405B, stated layouts, MoE and expert TP (read back through the Megatron command-line reader).
#include "reports/megatron_args.hpp"

#include <gtest/gtest.h>

#include "core/megatron_command_line.hpp"
#include "core/megatron_scenario.hpp"
#include "core/scenario.hpp"
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

TEST(MegatronArgs, LlamaLikeInterleavedPlan) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  std::string text = megatron_args(scenario, testing::pinned(scenario));
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
      "--grad-reduce-in-bf16",
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
  EXPECT_EQ(text, megatron_args(scenario, testing::pinned(scenario)));  // deterministic
}

// The output layer's deferred weight gradients: both flags where the plan has pipeline parallelism (Megatron-Core
// refuses them without), the limit only where one is set (0, every micro-batch, is Megatron's default); read back.
TEST(MegatronArgs, DeferredEmbeddingWgradIsWrittenForPipelinesAndReadBack) {
  Scenario scenario = parse_scenario_text(kLlamaScenario, "llama.json");
  scenario.framework.defer_embedding_wgrad_compute = true;
  scenario.framework.wgrad_deferral_limit = 22;
  Strategy strategy = testing::pinned(scenario);
  std::string text = megatron_args(scenario, strategy);
  EXPECT_TRUE(has_argument(text, "--defer-embedding-wgrad-compute")) << text;
  EXPECT_TRUE(has_argument(text, "--wgrad-deferral-limit 22")) << text;
  const MegatronScenario back = scenario_from_megatron_command_line(
      scenario, parse_megatron_command_line(text, "megatron_args.txt"), "megatron_args.txt");
  EXPECT_TRUE(back.scenario.framework.defer_embedding_wgrad_compute);
  EXPECT_EQ(back.scenario.framework.wgrad_deferral_limit, 22);
  scenario.framework.wgrad_deferral_limit = 0;
  text = megatron_args(scenario, strategy);
  EXPECT_TRUE(has_argument(text, "--defer-embedding-wgrad-compute")) << text;
  EXPECT_EQ(text.find("--wgrad-deferral-limit"), std::string::npos) << text;
  strategy.pipeline_model_parallel_size = 1;
  strategy.virtual_pipeline_model_parallel_size = 1;
  strategy.schedule = Schedule::one_f_one_b;
  strategy.data_parallel_size *= 2;
  text = megatron_args(scenario, strategy);
  EXPECT_EQ(text.find("--defer-embedding-wgrad-compute"), std::string::npos) << text;
}

TEST(MegatronArgs, GptLikePlan) {
  Scenario scenario = parse_scenario_text(kGptScenario, "gpt.json");
  std::string text = megatron_args(scenario, testing::pinned(scenario));
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


// Nemotron-4's activation is Megatron's --squared-relu, and neither GeLU (the default) nor --swiglu is named.
TEST(MegatronArgs, SquaredReluIsNamed) {
  Scenario scenario = parse_scenario_text(kGptScenario, "gpt.json");
  scenario.model.activation = Activation::squared_relu;
  const std::string text = megatron_args(scenario, testing::pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--squared-relu")) << text;
  EXPECT_FALSE(has_argument(text, "--swiglu")) << text;
}

// gpt-oss's activation is Megatron's --quick-geglu with its offset and clamp (transformer_config.py's
// glu_linear_offset and activation_func_clamp_value), and the file reads back as the same model.
TEST(MegatronArgs, QuickGegluIsNamedWithItsTerms) {
  Scenario scenario = parse_scenario_text(kGptScenario, "gpt.json");
  scenario.model.activation = Activation::quick_geglu;
  scenario.model.glu_linear_offset = 1;
  scenario.model.activation_func_clamp_value = 7;
  const std::string text = megatron_args(scenario, testing::pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--quick-geglu")) << text;
  EXPECT_TRUE(has_argument(text, "--glu-linear-offset 1")) << text;
  EXPECT_TRUE(has_argument(text, "--activation-func-clamp-value 7")) << text;
  EXPECT_FALSE(has_argument(text, "--swiglu")) << text;
}

// 126 layers over 16 x 8 virtual stages: the first and last hold the embedding and the loss (Llama 3).
TEST(MegatronArgs, UnevenSplitCountsEmbeddingAndLossAsLayersAndZero2IsNamed) {
  Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama3-405b-16384xH100.json");
  std::string text = megatron_args(scenario, testing::pinned(scenario));
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
  std::string text = megatron_args(scenario, testing::pinned(scenario));
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
  const std::string text = megatron_args(scenario, testing::pinned(scenario));
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
  std::string text = megatron_args(scenario, testing::pinned(scenario));
  for (const char* argument :
       {"--expert-model-parallel-size 4", "--expert-tensor-parallel-size 1", "--context-parallel-size 2",
        "--cp-comm-type allgather", "--sequence-parallel", "--tp-comm-overlap", "--num-experts 8",
        "--moe-router-topk 2", "--moe-ffn-hidden-size 14336", "--moe-token-dispatcher-type alltoall",
        "--moe-grouped-gemm", "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 0.01",
        "--rotary-base 1000000",
        "--group-query-attention", "--num-query-groups 8", "--max-position-embeddings 32768"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
  EXPECT_TRUE(has_comment_with(text, "routing imbalance 1.25")) << text;
  EXPECT_FALSE(has_argument(text, "--moe-router-force-load-balancing")) << text;
  EXPECT_FALSE(has_argument(text, "--no-bias-dropout-fusion")) << text;
  // Biased experts (gpt-oss): Megatron's grouped experts assert that its bias-dropout fusion is off.
  scenario.model.add_bias_linear = true;
  EXPECT_TRUE(has_argument(megatron_args(scenario, testing::pinned(scenario)), "--no-bias-dropout-fusion"));
  scenario.model.add_bias_linear = false;
  // Forced balance and loss-free bias are Megatron switches; the all-gather dispatcher its type.
  scenario.model.moe.routing_imbalance.reset();
  scenario.model.moe.routing.emplace().distribution = RoutingDistribution::forced;
  scenario.framework.moe_token_dispatcher_type = MoeTokenDispatcher::allgather;
  text = megatron_args(scenario, testing::pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--moe-router-force-load-balancing")) << text;
  EXPECT_TRUE(has_argument(text, "--moe-token-dispatcher-type allgather")) << text;
  scenario.model.moe.routing.emplace().distribution = RoutingDistribution::loss_free;
  text = megatron_args(scenario, testing::pinned(scenario));
  // A loss-free router's loads ask for one: Megatron's expert bias, with the sigmoid scores it needs.
  EXPECT_TRUE(has_argument(text, "--moe-router-enable-expert-bias")) << text;
  EXPECT_TRUE(has_argument(text, "--moe-router-score-function sigmoid")) << text;
  EXPECT_FALSE(has_argument(text, "--moe-router-bias-update-rate")) << text;  // Megatron's default
  EXPECT_TRUE(has_comment_with(text, "routing loss_free")) << text;
  scenario.model.moe.routing.reset();
  scenario.model.moe.router_score_function = RouterScore::sigmoid;
  scenario.model.moe.router_expert_bias = true;
  scenario.model.moe.router_bias_update_rate = 1e-4;
  scenario.model.moe.router_topk_scaling_factor = 2.5;
  scenario.model.moe.router_num_groups = 4;
  scenario.model.moe.router_group_topk = 2;
  text = megatron_args(scenario, testing::pinned(scenario));
  for (const char* argument : {"--moe-router-score-function sigmoid", "--moe-router-enable-expert-bias",
                               "--moe-router-bias-update-rate 0.0001", "--moe-router-topk-scaling-factor 2.5",
                               "--moe-router-num-groups 4", "--moe-router-group-topk 2"})
    EXPECT_TRUE(has_argument(text, argument)) << argument << "\n" << text;
  scenario.model.moe.router_score_function = RouterScore::softmax;
  scenario.model.moe.router_expert_bias = false;
  scenario.model.moe.router_pre_softmax = true;
  scenario.model.moe.router_num_groups = scenario.model.moe.router_group_topk = 0;
  text = megatron_args(scenario, testing::pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--moe-router-pre-softmax")) << text;
  EXPECT_FALSE(has_argument(text, "--moe-router-score-function sigmoid")) << text;
  EXPECT_FALSE(has_argument(text, "--moe-router-enable-expert-bias")) << text;
  scenario.model.moe.router_pre_softmax = false;
  scenario.model.moe.aux_loss_coeff = 0;  // no load-balancing loss: Megatron's type none, no weight
  text = megatron_args(scenario, testing::pinned(scenario));
  EXPECT_TRUE(has_argument(text, "--moe-router-load-balancing-type none")) << text;
  EXPECT_FALSE(has_argument(text, "--moe-aux-loss-coeff 0")) << text;
  scenario.model.moe.aux_loss_coeff = 1e-2;
  scenario.model.moe.routing.emplace().distribution = RoutingDistribution::loss_free;
  // Capacity and padding, the overlapped EP schedule and its delayed weight gradients: Megatron's flags.
  // (The strategy as pinned above: the flags are written as the scenario says, validity.cpp holds them to it.)
  EXPECT_FALSE(has_argument(text, "--overlap-moe-expert-parallel-comm")) << text;
  const Strategy strategy = testing::pinned(scenario);
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
  const Strategy strategy = testing::pinned(scenario);
  EXPECT_EQ(strategy.expert_tensor_parallel_size, 2);
  const std::string text = megatron_args(scenario, strategy);
  EXPECT_TRUE(has_argument(text, "--expert-tensor-parallel-size 2")) << text;
  const MegatronScenario read =
      scenario_from_megatron_command_line(scenario, parse_megatron_command_line(text, "args"), "args");
  EXPECT_EQ(read.scenario.strategy->expert_tensor_parallel_size, 2);
  EXPECT_EQ(arguments(megatron_args(read.scenario, testing::pinned(read.scenario))), arguments(text));
}

}  // namespace
}  // namespace twin
