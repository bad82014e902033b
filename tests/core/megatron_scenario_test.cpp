// A Megatron-LM command line read into a scenario: Megatron's defaults for absent flags, the base scenario's
// cluster and vocabulary, what twin does not model listed, and contradictions refused with the flag named.
#include "core/megatron_scenario.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace twin {
namespace {

Scenario base_scenario() {
  return parse_scenario_text(R"({
    "name": "my cluster",
    "model": { "preset": "llama2-7b" },
    "training": { "seq_length": 4096, "global_batch_size": 64 },
    "cluster": { "nodes": [ { "count": 2, "gpu": "H100-SXM-80GB", "gpus_per_node": 8,
                            "nics": { "count": 8, "bandwidth_Gbps": 400 } } ] }
  })",
                             "base.json");
}

MegatronScenario read_command_line(const std::string& text) {
  return scenario_from_megatron_command_line(base_scenario(), parse_megatron_command_line(text, "run.sh"), "run.sh");
}

std::string megatron_error_of(const std::string& text) {
  try {
    read_command_line(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kRequired =
    "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
    "--max-position-embeddings 2048 --micro-batch-size 2 ";

// Absent flags are Megatron's defaults, not the base scenario's Llama: GeLU, LayerNorm, learned positions, biases,
// tied embeddings, dropout 0.1, no overlaps, fp32, one micro-batch per data-parallel rank.
TEST(MegatronScenario, AbsentFlagsAreMegatronsDefaults) {
  const MegatronScenario r = read_command_line(kRequired);
  const ModelConfig& m = r.scenario.model;
  EXPECT_EQ(m.num_layers, 24);
  EXPECT_EQ(m.ffn_hidden_size, 4 * 2048);
  EXPECT_EQ(m.num_query_groups, 16);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.vocab_size, 32000);  // the base scenario's: Megatron takes it from the tokenizer
  EXPECT_EQ(m.activation, Activation::gelu);
  EXPECT_EQ(m.normalization, Normalization::layernorm);
  EXPECT_FALSE(m.position_embedding_rope);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_FALSE(m.untie_embeddings_and_output_weights);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_EQ(m.attention_backend, AttentionBackend::fused);  // auto
  EXPECT_EQ(r.scenario.training.precision, "fp32");
  EXPECT_EQ(r.scenario.training.global_batch_size, 2 * 16);
  EXPECT_FALSE(r.scenario.framework.overlap_grad_reduce);
  EXPECT_FALSE(r.scenario.framework.cross_entropy_loss_fusion);
  EXPECT_TRUE(r.scenario.framework.gradient_accumulation_fusion);
  ASSERT_TRUE(r.scenario.strategy.has_value());
  EXPECT_EQ(r.scenario.strategy->micro_batch_size, 2);
  EXPECT_EQ(r.scenario.strategy->zero_stage, 0);
  EXPECT_EQ(r.scenario.name, "my cluster");
  EXPECT_EQ(r.scenario.cluster, base_scenario().cluster);
  EXPECT_EQ(r.not_modelled,
            (std::vector<std::string>{"--attention-backend auto (Megatron's default): priced as fused, Transformer "
                                      "Engine's choice on Hopper"}));
}

TEST(MegatronScenario, LlamaStyleRunWithInterleavingFsdpAndTheRestListed) {
  const MegatronScenario r = read_command_line(
      "CUDA_DEVICE_MAX_CONNECTIONS=4 torchrun --nproc-per-node 8 pretrain_gpt.py " + kRequired +
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel --swiglu "
      "--num-layers-per-virtual-pipeline-stage 6 --normalization RMSNorm --position-embedding-type rope "
      "--rotary-base 500000 --group-query-attention --num-query-groups 4 --disable-bias-linear --bf16 "
      "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads --ckpt-format fsdp_dtensor "
      "--overlap-grad-reduce --recompute-granularity selective --attention-backend flash --vocab-size 50000 "
      "--global-batch-size 64 --lr 3e-4");
  const ModelConfig& m = r.scenario.model;
  EXPECT_EQ(m.ffn_hidden_size, 5440);  // int(4 * 2048 * 2 / 3 / 64) * 64
  EXPECT_EQ(m.rotary_base, 500000);
  EXPECT_EQ(m.num_query_groups, 4);
  EXPECT_EQ(m.vocab_size, 50000);
  const Strategy& s = *r.scenario.strategy;
  EXPECT_EQ(s.virtual_pipeline_model_parallel_size, 2);
  EXPECT_EQ(s.schedule, Schedule::interleaved_1f1b);
  EXPECT_TRUE(s.sequence_parallel);
  EXPECT_EQ(s.zero_stage, 2);
  EXPECT_EQ(s.recompute, Recompute::selective);
  EXPECT_EQ(r.not_modelled,
            (std::vector<std::string>{"CUDA_DEVICE_MAX_CONNECTIONS=4: the environment, not modelled",
                                      "torchrun --nproc-per-node 8 pretrain_gpt.py: the launcher; the GPUs are the "
                                      "scenario's cluster",
}));
  EXPECT_DOUBLE_EQ(r.scenario.training.recipe.lr, 3e-4);
  // bf16 training reduces its gradients in fp32 unless --grad-reduce-in-bf16 (Megatron's arguments.py:1207-1216).
  EXPECT_EQ(r.scenario.framework.reduce_dtype_bytes, std::optional<int>(4));
  EXPECT_EQ(read_command_line(kRequired + "--bf16 --grad-reduce-in-bf16").scenario.framework.reduce_dtype_bytes,
            std::optional<int>(2));
  EXPECT_EQ(read_command_line(kRequired).scenario.framework.reduce_dtype_bytes, std::nullopt);  // fp32: as trained
}

// A layout sets the virtual stages as validate_args derives them (its stages over PP) and is the strategy's layout;
// --mtp-num-layers is the model's MTP depths. 23 layers over 4 virtual stages: no even split, no divisibility rule.
TEST(MegatronScenario, PipelineLayoutAndMultiTokenPredictionAreRead) {
  const MegatronScenario r = read_command_line(
      "--num-layers 23 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
      "--micro-batch-size 1 --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et*5|t*6|t*6|t*6mL "
      "--mtp-num-layers 1 --global-batch-size 64");
  const Strategy& s = *r.scenario.strategy;
  EXPECT_EQ(s.virtual_pipeline_model_parallel_size, 2);
  EXPECT_EQ(s.schedule, Schedule::interleaved_1f1b);
  EXPECT_EQ(s.pipeline_model_parallel_layout.text, "Et*5|t*6|t*6|t*6mL");
  EXPECT_EQ(r.scenario.model.mtp_num_layers, 1);
  EXPECT_NE(megatron_error_of(kRequired + "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et|tX|L")
                .find("--pipeline-model-parallel-layout"),
            std::string::npos);
  // validate_args refuses a virtual-stage flag beside the layout, which states the virtual stages itself.
  EXPECT_NE(megatron_error_of(kRequired + "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et|t|t|tL "
                                          "--num-virtual-stages-per-pipeline-rank 2")
                .find("--num-virtual-stages-per-pipeline-rank"),
            std::string::npos);
}

// Megatron's schedule as it runs it: linear decay by default, over --lr-decay-iters or else --train-iters.
TEST(MegatronScenario, LearningRateScheduleAndClippingAreTheRecipe) {
  const TrainingRecipe r =
      read_command_line(kRequired + "--lr 2e-4 --min-lr 2e-5 --lr-warmup-iters 50 --train-iters 1000 --clip-grad 0.5")
          .scenario.training.recipe;
  EXPECT_DOUBLE_EQ(r.lr, 2e-4);
  EXPECT_DOUBLE_EQ(r.min_lr, 2e-5);
  EXPECT_EQ(r.lr_warmup_iters, 50);
  EXPECT_EQ(r.lr_decay_iters, 1000);
  EXPECT_EQ(r.lr_decay_style, LrDecayStyle::linear);
  EXPECT_DOUBLE_EQ(r.clip_grad, 0.5);
  EXPECT_EQ(read_command_line(kRequired + "--lr 2e-4 --lr-decay-style cosine --lr-decay-iters 300 --train-iters 1000")
                .scenario.training.recipe.lr_decay_iters,
            300);
  EXPECT_EQ(read_command_line(kRequired + "--lr 2e-4 --lr-decay-style WSD").not_modelled.back(),
            "--lr-decay-style WSD: twin execute runs constant, linear or cosine; not modelled");
  EXPECT_NE(megatron_error_of(kRequired + "--lr 2e-4 --min-lr 1e-3").find("--min-lr"), std::string::npos);
}

TEST(MegatronScenario, MoeFlagsTwinPricesOtherwiseAreListed) {
  const MegatronScenario r = read_command_line(kRequired +
                                               "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 "
                                               "--moe-router-load-balancing-type sinkhorn");
  EXPECT_EQ(r.scenario.model.moe.num_experts, 8);
  EXPECT_EQ(r.scenario.model.moe.ffn_hidden_size, 4 * 2048);
  EXPECT_EQ(r.scenario.strategy->expert_model_parallel_size, 4);
  // No --moe-token-dispatcher-type: Megatron's default, the all-gather dispatcher, which twin lowers.
  EXPECT_EQ(r.scenario.framework.moe_token_dispatcher_type, MoeTokenDispatcher::allgather);
  ASSERT_EQ(r.not_modelled.size(), 3u);
  EXPECT_EQ(r.not_modelled[1],
            "no --moe-grouped-gemm: the experts are priced as grouped GEMMs, not Megatron's loop "
            "over experts");
  EXPECT_EQ(r.not_modelled[2],
            "--moe-router-load-balancing-type sinkhorn: priced as an auxiliary loss (its routing "
            "counts all-reduced over TP and CP)");
  // The loss's weight: Megatron's default 0 when absent, the value given, 0 with no loss; a sequence-wise loss
  // trains as the per-micro-batch one, said so.
  EXPECT_EQ(r.scenario.model.moe.aux_loss_coeff, 0.0);
  const std::string moe = "--num-experts 8 --moe-router-topk 2 ";
  EXPECT_EQ(read_command_line(kRequired + moe + "--moe-aux-loss-coeff 1e-3").scenario.model.moe.aux_loss_coeff, 1e-3);
  EXPECT_EQ(read_command_line(kRequired + moe + "--moe-router-load-balancing-type none --moe-aux-loss-coeff 1e-3")
                .scenario.model.moe.aux_loss_coeff,
            0.0);
  const MegatronScenario sequence_wise =
      read_command_line(kRequired + moe + "--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4");
  EXPECT_EQ(sequence_wise.scenario.model.moe.aux_loss_coeff, 1e-4);
  EXPECT_EQ(sequence_wise.not_modelled.back(),
            "--moe-router-load-balancing-type seq_aux_loss: twin execute trains with the per-micro-batch aux_loss of "
            "that weight");
}

// Expert TP is Megatron's default, the TP size, unless stated; the scenario states it only where it is not 1.
TEST(MegatronScenario, ExpertTensorParallelSizeDefaultsToTheTensorParallelSize) {
  const std::string moe = "--num-experts 8 --expert-model-parallel-size 2 --tensor-model-parallel-size 2 ";
  EXPECT_EQ(read_command_line(kRequired + moe).scenario.strategy->expert_tensor_parallel_size, 2);
  EXPECT_EQ(read_command_line(kRequired + moe + "--expert-tensor-parallel-size 1").scenario.strategy
                ->expert_tensor_parallel_size,
            1);
  EXPECT_EQ(read_command_line(kRequired + "--num-experts 8 --expert-tensor-parallel-size 4").scenario.strategy
                ->expert_tensor_parallel_size,
            4);
  EXPECT_EQ(read_command_line(kRequired + "--num-experts 8").scenario.strategy->expert_tensor_parallel_size, 1);
}

// The routing and dispatcher flags twin writes come back as the scenario's routing and framework.
TEST(MegatronScenario, MoeRoutingAndDispatcherFlagsAreRead) {
  const std::string moe = "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 ";
  const MegatronScenario forced =
      read_command_line(kRequired + moe + "--moe-token-dispatcher-type alltoall --moe-router-force-load-balancing");
  EXPECT_EQ(forced.scenario.framework.moe_token_dispatcher_type, MoeTokenDispatcher::alltoall);
  ASSERT_TRUE(forced.scenario.model.moe.routing.has_value());
  EXPECT_EQ(forced.scenario.model.moe.routing->distribution, RoutingDistribution::forced);
  const MegatronScenario loss_free = read_command_line(
      kRequired + moe +
      "--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-topk-scaling-factor 2.5 "
      "--moe-router-bias-update-rate 1e-4");
  ASSERT_TRUE(loss_free.scenario.model.moe.routing.has_value());
  EXPECT_EQ(loss_free.scenario.model.moe.routing->distribution, RoutingDistribution::loss_free);
  const MoeConfig& router = loss_free.scenario.model.moe;
  EXPECT_EQ(router.router_score_function, RouterScore::sigmoid);
  EXPECT_TRUE(router.router_expert_bias);
  EXPECT_DOUBLE_EQ(router.router_topk_scaling_factor, 2.5);
  EXPECT_DOUBLE_EQ(router.router_bias_update_rate, 1e-4);
  EXPECT_FALSE(router.router_pre_softmax);
  EXPECT_TRUE(read_command_line(kRequired + moe + "--moe-router-pre-softmax").scenario.model.moe.router_pre_softmax);
  const MoeConfig grouped =
      read_command_line(kRequired + moe + "--moe-router-num-groups 4 --moe-router-group-topk 2").scenario.model.moe;
  EXPECT_EQ(grouped.router_num_groups, 4);
  EXPECT_EQ(grouped.router_group_topk, 2);
  EXPECT_NE(megatron_error_of(kRequired + moe + "--moe-router-group-topk 2")
                .find("--moe-router-group-topk: needs --moe-router-num-groups"),
            std::string::npos);
  EXPECT_NE(megatron_error_of(kRequired + moe + "--moe-router-num-groups 3 --moe-router-group-topk 2")
                .find("--moe-router-num-groups: 3 must divide --num-experts"),
            std::string::npos);
  // Megatron's own rules (TransformerConfig.__post_init__): an expert bias needs sigmoid (or sqrtsoftplus) scores;
  // sqrtsoftplus twin does not model.
  EXPECT_NE(megatron_error_of(kRequired + moe + "--moe-router-enable-expert-bias")
                .find("--moe-router-enable-expert-bias: needs --moe-router-score-function sigmoid"),
            std::string::npos);
  EXPECT_NE(megatron_error_of(kRequired + moe + "--moe-router-score-function sqrtsoftplus")
                .find("--moe-router-score-function: expected softmax or sigmoid, got sqrtsoftplus"),
            std::string::npos);
  const MegatronScenario flex = read_command_line(kRequired + moe + "--moe-token-dispatcher-type flex");
  EXPECT_EQ(flex.scenario.framework.moe_token_dispatcher_type, MoeTokenDispatcher::flex);
  const MegatronScenario overlapped =
      read_command_line(kRequired + moe + "--overlap-moe-expert-parallel-comm --delay-wgrad-compute");
  EXPECT_TRUE(overlapped.scenario.framework.overlap_moe_expert_parallel_comm);
  EXPECT_TRUE(overlapped.scenario.framework.delay_wgrad_compute);
  EXPECT_FALSE(read_command_line(kRequired + moe + "--delay-wgrad-compute").scenario.framework.delay_wgrad_compute);
  const MegatronScenario capped =
      read_command_line(kRequired + moe + "--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity");
  EXPECT_EQ(capped.scenario.model.moe.expert_capacity_factor, 1.25);
  EXPECT_TRUE(capped.scenario.model.moe.pad_expert_input_to_capacity);
  EXPECT_FALSE(
      read_command_line(kRequired + moe + "--moe-expert-capacity-factor -1").scenario.model.moe.expert_capacity_factor);
}

// --defer-embedding-wgrad-compute and its limit are read; the limit alone is listed as ignored, and the flag without
// pipeline parallelism refused, as Megatron-Core refuses it.
TEST(MegatronScenario, DeferredEmbeddingWgradFlagsAreRead) {
  const std::string pipelined = kRequired + "--pipeline-model-parallel-size 2 ";
  const MegatronScenario deferred =
      read_command_line(pipelined + "--defer-embedding-wgrad-compute --wgrad-deferral-limit 22");
  EXPECT_TRUE(deferred.scenario.framework.defer_embedding_wgrad_compute);
  EXPECT_EQ(deferred.scenario.framework.wgrad_deferral_limit, 22);
  EXPECT_EQ(read_command_line(pipelined + "--defer-embedding-wgrad-compute").scenario.framework.wgrad_deferral_limit, 0);
  const MegatronScenario limit_alone = read_command_line(pipelined + "--wgrad-deferral-limit 22");
  EXPECT_FALSE(limit_alone.scenario.framework.defer_embedding_wgrad_compute);
  bool listed = false;
  for (const std::string& line : limit_alone.not_modelled)
    listed |= line.find("--wgrad-deferral-limit 22: ignored without --defer-embedding-wgrad-compute") == 0;
  EXPECT_TRUE(listed);
  EXPECT_NE(megatron_error_of(kRequired + "--defer-embedding-wgrad-compute").find("needs pipeline parallelism"),
            std::string::npos)
      << megatron_error_of(kRequired + "--defer-embedding-wgrad-compute");
}

TEST(MegatronScenario, ContradictionsAndWhatTwinCannotModelAreRefusedNamingTheFlag) {
  EXPECT_EQ(megatron_error_of(kRequired + "--seq-length 4096"),
            "run.sh: --max-position-embeddings: 2048 must be at least --seq-length 4096 (arguments.py:1354) "
            "(launched on the scenario's 16 GPUs)");
  EXPECT_EQ(megatron_error_of(kRequired + "--tensor-model-parallel-size 3"),
            "run.sh: --tensor-model-parallel-size: world size 16 is not divisible by TP x PP x CP 3 x 1 x 1 "
            "(arguments.py:432) (launched on the scenario's 16 GPUs)");
  EXPECT_NE(megatron_error_of(kRequired + "--overlap-param-gather --overlap-grad-reduce")
                .find("--overlap-param-gather: needs"),
            std::string::npos);
  EXPECT_EQ(megatron_error_of(kRequired + "--use-megatron-fsdp --ckpt-format fsdp_dtensor"), "");
  EXPECT_EQ(megatron_error_of("CUDA_DEVICE_MAX_CONNECTIONS=1 " + kRequired +
                              "--use-megatron-fsdp --ckpt-format fsdp_dtensor"),
            "run.sh: --use-megatron-fsdp: CUDA_DEVICE_MAX_CONNECTIONS must be unset or above 1 (arguments.py:1166) "
            "(launched on the scenario's 16 GPUs)");
  EXPECT_EQ(megatron_error_of(kRequired + "--position-embedding-type yarn"),
            "run.sh: --position-embedding-type: expected rope or learned_absolute (what twin models), got yarn");
  EXPECT_EQ(megatron_error_of(kRequired + "--optimizer muon"),
            "run.sh: --optimizer: expected adam or sgd (what twin models), got muon");
  EXPECT_EQ(megatron_error_of(kRequired + "--context-parallel-size 2 --cp-comm-type a2a"),
            "run.sh: --cp-comm-type: expected p2p or allgather for every layer (what twin models), got a2a");
  EXPECT_EQ(
      megatron_error_of("--hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
                        "--micro-batch-size 1"),
      "run.sh: --num-layers: expected it: Megatron has no default for it");
  // A value the scenario format refuses is told as the flag that gave it.
  EXPECT_EQ(megatron_error_of(kRequired + "--hidden-dropout 1.5"),
            "run.sh: --hidden-dropout: expected a dropout probability in [0, 1), got 1.5");
}

}  // namespace
}  // namespace twin
