// Argument names and spellings are Megatron-LM's at kMegatronCommit (core/megatron_flags.hpp holds them as facts,
// and tests/reports/megatron_args_guard_test.cpp holds every written argument against them): e.g. --cp-comm-type
// takes "allgather" where twin says "all_gather", and --normalization "RMSNorm". Megatron's own checks shape what
// is written: sequence parallelism only with TP > 1 (Megatron turns it off otherwise), --tp-comm-overlap only with
// it, --overlap-param-gather only with a sharded optimizer and --overlap-grad-reduce, --max-position-embeddings at
// least --seq-length.
#include "reports/megatron_args.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/megatron_flags.hpp"
#include "core/moe_layer_pattern.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace {

// Lines of the file: arguments and '#' comments, in the order they are added.
class ArgsText {
 public:
  void arg(const std::string& flag) { lines_.push_back(flag); }
  template <typename T>
  void arg(const std::string& flag, const T& value) {
    lines_.push_back(fmt::format("{} {}", flag, value));
  }
  // One line whatever the text holds: a scenario name may contain line breaks.
  void comment(std::string text) {
    for (char& c : text)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    lines_.push_back("# " + text);
  }
  std::string text() const {
    std::string out;
    for (const std::string& line : lines_) out += line + "\n";
    return out;
  }

 private:
  std::vector<std::string> lines_;
};

void header(ArgsText& out, const Scenario& scenario, const std::string& key) {
  out.comment(fmt::format("Megatron-LM pretrain_gpt.py arguments for twin's plan {} of \"{}\" (flags as {} "
                          "declares them).",
                          key, scenario.name, kMegatronCommit));
}

// Megatron-FSDP: ZeRO 2 and 3 as Megatron-LM runs them (gradients, or gradients and weights, sharded over the
// data-parallel group, gathered a layer ahead): what twin's "megatron" ZeRO implementation prices.
bool megatron_fsdp(const Scenario& scenario, const Strategy& s) {
  return s.zero_stage == 2 || (s.zero_stage == 3 && scenario.framework.zero_implementation == ZeroImplementation::megatron);
}

// The environment Megatron asks for. Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS unset or above 1
// (arguments.py:1166); with TP or CP, before Blackwell, Megatron's communication overlap relies on one hardware
// queue, CUDA_DEVICE_MAX_CONNECTIONS=1 (megatron/core/tensor_parallel/layers.py; arguments.py:1453 warns without
// it, and Megatron-LM before 2025-03 refused to start: a Hopper cluster may run such a version).
void use_line(ArgsText& out, const Scenario& scenario, const Strategy& s) {
  const std::string command = "torchrun ... pretrain_gpt.py $(grep -v '^#' megatron_args.txt) --data-path ... "
                              "--tokenizer-type ...";
  if (megatron_fsdp(scenario, s)) {
    out.comment("Use: env -u CUDA_DEVICE_MAX_CONNECTIONS " + command);
    out.comment("Megatron-FSDP requires CUDA_DEVICE_MAX_CONNECTIONS unset or above 1.");
  } else if (s.tensor_model_parallel_size > 1 || s.context_parallel_size > 1) {
    out.comment("Use: CUDA_DEVICE_MAX_CONNECTIONS=1 " + command);
    out.comment("CUDA_DEVICE_MAX_CONNECTIONS=1: with TP or CP, Megatron's communication overlap needs one hardware "
                "queue (before Blackwell).");
  } else {
    out.comment("Use: " + command);
  }
}

std::string cp_comm_type_name(CpCommType type) { return type == CpCommType::all_gather ? "allgather" : "p2p"; }

void parallelism(ArgsText& out, const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  out.arg("--tensor-model-parallel-size", s.tensor_model_parallel_size);
  out.arg("--pipeline-model-parallel-size", s.pipeline_model_parallel_size);
  out.arg("--context-parallel-size", s.context_parallel_size);
  if (m.is_moe()) {
    out.arg("--expert-model-parallel-size", s.expert_model_parallel_size);
    // Always written: Megatron's default is the TP size, twin's 1.
    out.arg("--expert-tensor-parallel-size", s.expert_tensor_parallel_size);
  }
  if (s.sequence_parallel && s.tensor_model_parallel_size > 1) out.arg("--sequence-parallel");
  if (s.context_parallel_size > 1) out.arg("--cp-comm-type", cp_comm_type_name(scenario.framework.cp_comm_type));

  // Layers over (virtual) pipeline stages. An uneven split (Llama 3's) leaves one layer off the last
  // virtual stage, or also one off the first: Megatron counts the loss, or also the embedding, as a layer.
  if (s.schedule == Schedule::double_strand) return;  // DHeLlam's folded chunks: said by a comment instead
  // A stated layout says it all, and Megatron takes it alone (arguments.py: "No more than one of ...
  // --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout").
  if (!s.pipeline_model_parallel_layout.empty()) {
    out.arg("--pipeline-model-parallel-layout", s.pipeline_model_parallel_layout.text);
    return;
  }
  const bool interleaved = s.schedule == Schedule::interleaved_1f1b && s.virtual_pipeline_model_parallel_size > 1;
  const int virtual_stages = s.pipeline_model_parallel_size * (interleaved ? s.virtual_pipeline_model_parallel_size : 1);
  const int per_virtual_stage = max_layers_in_virtual_stage(m, s);
  const int missing = virtual_stages * per_virtual_stage - m.num_layers;
  if (s.pipeline_model_parallel_size > 1 && missing >= 2) out.arg("--account-for-embedding-in-pipeline-split");
  if (s.pipeline_model_parallel_size > 1 && missing >= 1) out.arg("--account-for-loss-in-pipeline-split");
  if (interleaved) out.arg("--num-layers-per-virtual-pipeline-stage", per_virtual_stage);
}

void batch(ArgsText& out, const Scenario& scenario, const Strategy& s) {
  out.arg("--micro-batch-size", s.micro_batch_size);
  out.arg("--global-batch-size", scenario.training.global_batch_size);
  out.arg("--seq-length", scenario.training.seq_length);
}

// The architecture variants of 2025-26, as Megatron's flags spell them; what it has no flag for is said in a comment
// (the file then does not train the same model).
void model_variants(ArgsText& out, const ModelConfig& m) {
  if (m.mla.enabled()) {
    out.arg("--multi-latent-attention");
    if (m.mla.q_lora_rank > 0) out.arg("--q-lora-rank", m.mla.q_lora_rank);
    out.arg("--kv-lora-rank", m.mla.kv_lora_rank);
    out.arg("--qk-head-dim", m.mla.qk_head_dim);
    out.arg("--qk-pos-emb-head-dim", m.mla.qk_pos_emb_head_dim);
    out.arg("--v-head-dim", m.mla.v_head_dim);
  }
  if (m.qk_layernorm) out.arg("--qk-layernorm");
  if (m.mtp_num_layers > 0) out.arg("--mtp-num-layers", m.mtp_num_layers);
  if (m.window_size > 0) out.arg("--window-size", fmt::format("{},0", m.window_size - 1));  // keys before, after
  if (m.window_attn_skip_freq > 0) out.arg("--window-attn-skip-freq", m.window_attn_skip_freq);
  if (m.attention_sinks) out.arg("--softmax-type", "learnable");
  std::vector<std::string> missing;
  if (m.activation == Activation::geglu) missing.emplace_back("GeGLU (gated_linear_unit has no flag)");
  if (m.attention_softcap > 0 || m.final_logit_softcap > 0) missing.emplace_back("logit soft-capping");
  if (m.post_norms) missing.emplace_back("post norms");
  if (!missing.empty())
    out.comment(fmt::format("Megatron-LM at {} has no flags for: {}; these arguments train without them.",
                            kMegatronCommit, fmt::join(missing, ", ")));
}

// The router as Megatron's flags, its defaults left out. A routing priced as a loss-free router's loads
// (model.moe.routing loss_free) asks for such a router: Megatron's expert bias, which needs sigmoid scores.
void router_arguments(ArgsText& out, const MoeConfig& moe) {
  const MoeConfig megatron;
  const bool loss_free =
      moe.router_expert_bias || effective_routing(moe).distribution == RoutingDistribution::loss_free;
  if (moe.router_score_function == RouterScore::sigmoid || loss_free)
    out.arg("--moe-router-score-function", to_string(RouterScore::sigmoid));
  if (moe.router_pre_softmax && !loss_free) out.arg("--moe-router-pre-softmax");
  if (moe.router_topk_scaling_factor != megatron.router_topk_scaling_factor)
    out.arg("--moe-router-topk-scaling-factor", moe.router_topk_scaling_factor);
  if (moe.router_group_topk > 0) {
    out.arg("--moe-router-num-groups", moe.router_num_groups);
    out.arg("--moe-router-group-topk", moe.router_group_topk);
  }
  if (!loss_free) return;
  out.arg("--moe-router-enable-expert-bias");
  if (moe.router_bias_update_rate != megatron.router_bias_update_rate)
    out.arg("--moe-router-bias-update-rate", moe.router_bias_update_rate);
}

void model(ArgsText& out, const ModelConfig& m, std::int64_t seq_length, MoeTokenDispatcher dispatcher) {
  out.arg("--num-layers", m.num_layers);
  out.arg("--hidden-size", m.hidden_size);
  out.arg("--ffn-hidden-size", m.ffn_hidden_size);
  out.arg("--num-attention-heads", m.num_attention_heads);
  if (m.num_query_groups != m.num_attention_heads) {
    out.arg("--group-query-attention");
    out.arg("--num-query-groups", m.num_query_groups);
  }
  out.arg("--kv-channels", m.kv_channels);
  // Megatron requires it at least the sequence (arguments.py:1354). With RoPE it sizes no weight, so a model
  // trained at a longer context than its own (long-context plans) is given the sequence; learned positions must
  // cover it already (scenario parsing refuses less).
  out.arg("--max-position-embeddings",
          m.position_embedding_rope ? std::max(m.max_position_embeddings, seq_length) : m.max_position_embeddings);
  out.arg("--position-embedding-type", m.position_embedding_rope ? "rope" : "learned_absolute");
  if (m.position_embedding_rope) out.arg("--rotary-base", m.rotary_base);
  out.arg("--normalization", m.normalization == Normalization::rmsnorm ? "RMSNorm" : "LayerNorm");
  if (m.activation == Activation::swiglu) out.arg("--swiglu");  // GeLU is Megatron's default
  if (m.activation == Activation::squared_relu) out.arg("--squared-relu");
  if (m.activation == Activation::quick_geglu) {
    out.arg("--quick-geglu");
    if (m.glu_linear_offset != 0) out.arg("--glu-linear-offset", m.glu_linear_offset);
    if (m.activation_func_clamp_value > 0) out.arg("--activation-func-clamp-value", m.activation_func_clamp_value);
  }
  if (m.untie_embeddings_and_output_weights) out.arg("--untie-embeddings-and-output-weights");
  if (!m.add_bias_linear) out.arg("--disable-bias-linear");
  // Megatron's grouped experts (TEGroupedMLP, moe/experts.py:205) assert that biased experts run without its
  // bias-dropout fusion.
  if (m.add_bias_linear && m.is_moe()) out.arg("--no-bias-dropout-fusion");
  // Megatron's defaults are 0.1 each; Llama-style models train without dropout.
  out.arg("--hidden-dropout", m.hidden_dropout);
  out.arg("--attention-dropout", m.attention_dropout);
  out.arg("--attention-backend", to_string(m.attention_backend));
  if (m.is_moe()) {
    out.arg("--num-experts", m.moe.num_experts);
    out.arg("--moe-router-topk", m.moe.top_k);
    out.arg("--moe-ffn-hidden-size", m.moe.ffn_hidden_size);
    if (m.moe.first_dense_layers > 0) out.arg("--moe-layer-freq", moe_layer_pattern(m));
    else if (m.moe.layer_freq != 1) out.arg("--moe-layer-freq", m.moe.layer_freq);
    if (m.moe.shared_expert_ffn_hidden_size > 0)
      out.arg("--moe-shared-expert-intermediate-size", m.moe.shared_expert_ffn_hidden_size);
    // What twin prices, as Megatron-LM's Mixtral recipe runs it (examples/mixtral/train_mixtral_8x7b_distributed.sh):
    // the framework's token dispatcher, the experts as grouped GEMMs, and the load-balancing loss whose routing
    // counts are all-reduced over TP and CP (model.moe.aux_loss_coeff; 0: none; no time); the router's flags;
    // forced balance (how NVIDIA times its MoE tables) asks for random logits.
    out.arg("--moe-token-dispatcher-type", dispatcher == MoeTokenDispatcher::allgather ? "allgather"
                                           : dispatcher == MoeTokenDispatcher::flex    ? "flex"
                                                                                       : "alltoall");
    out.arg("--moe-grouped-gemm");
    out.arg("--moe-router-load-balancing-type", m.moe.aux_loss_coeff > 0 ? "aux_loss" : "none");
    if (m.moe.aux_loss_coeff > 0) out.arg("--moe-aux-loss-coeff", m.moe.aux_loss_coeff);
    router_arguments(out, m.moe);
    if (effective_routing(m.moe).distribution == RoutingDistribution::forced)
      out.arg("--moe-router-force-load-balancing");
    if (m.moe.expert_capacity_factor) out.arg("--moe-expert-capacity-factor", *m.moe.expert_capacity_factor);
    if (m.moe.pad_expert_input_to_capacity) out.arg("--moe-pad-expert-input-to-capacity");
  }
  model_variants(out, m);
}

// training.fp8 as Megatron's flags (core/fp8.hpp); Megatron's defaults are left out but the format.
void fp8_arguments(ArgsText& out, const Fp8Config& fp8) {
  out.arg("--fp8-format", to_string(fp8.format));
  if (fp8.recipe != Fp8Recipe::delayed) out.arg("--fp8-recipe", to_string(fp8.recipe));
  if (fp8.param_gather) out.arg("--fp8-param-gather");
  if (!fp8.wgrad) out.arg("--no-fp8-wgrad");
  if (fp8.recipe == Fp8Recipe::delayed && fp8.amax_history_len != 1)
    out.arg("--fp8-amax-history-len", fp8.amax_history_len);
  if (!fp8.first_last_layers_bf16) return;
  out.arg("--first-last-layers-bf16");
  if (fp8.num_layers_at_start_in_bf16 != 1) out.arg("--num-layers-at-start-in-bf16", fp8.num_layers_at_start_in_bf16);
  if (fp8.num_layers_at_end_in_bf16 != 1) out.arg("--num-layers-at-end-in-bf16", fp8.num_layers_at_end_in_bf16);
}

// The recipe twin execute runs, every flag written: Megatron requires --lr and decays linearly by default.
void learning_rate_and_clipping(ArgsText& out, const TrainingRecipe& recipe) {
  out.arg("--lr", recipe.lr);
  out.arg("--min-lr", recipe.min_lr);
  out.arg("--lr-decay-style", to_string(recipe.lr_decay_style));
  out.arg("--lr-warmup-iters", recipe.lr_warmup_iters);
  if (recipe.lr_decay_iters) out.arg("--lr-decay-iters", *recipe.lr_decay_iters);
  out.arg("--clip-grad", recipe.clip_grad);
}

void precision_and_optimizer(ArgsText& out, const TrainingConfig& training, const FrameworkConfig& framework) {
  if (training.precision == "bf16") out.arg("--bf16");
  // Megatron reduces bf16 training's gradients in fp32 unless told (arguments.py:1207-1216); twin's plan states its own.
  if (training.precision == "bf16" && gradient_reduce_bytes(framework) == 2) out.arg("--grad-reduce-in-bf16");
  if (training.precision == "fp16") out.arg("--fp16");
  if (training.fp8) fp8_arguments(out, *training.fp8);
  out.arg("--optimizer", training.optimizer);
  learning_rate_and_clipping(out, training.recipe);
  const OptimizerPrecision& p = training.optimizer_precision;
  if (p.is_default()) return;
  // Transformer Engine's FusedAdam with lower-precision state (Megatron's precision-aware optimizer).
  out.arg("--use-precision-aware-optimizer");
  if (p.main_params == StateDtype::bf16)
    out.comment("main_params_dtype bf16 (no master copy) is twin's; Megatron offers fp32 or fp16 main parameters.");
  else if (p.main_params != StateDtype::fp32)
    out.arg("--main-params-dtype", to_string(p.main_params));
  if (p.exp_avg != StateDtype::fp32) out.arg("--exp-avg-dtype", to_string(p.exp_avg));
  if (p.exp_avg_sq != StateDtype::fp32) out.arg("--exp-avg-sq-dtype", to_string(p.exp_avg_sq));
  if (p.store_param_remainders)
    out.comment("store_param_remainders: the precision-aware optimizer keeps them with Transformer Engine 2.1 or later.");
}

void recompute(ArgsText& out, const Strategy& s) {
  const Recompute recompute = s.recompute;
  if (recompute == Recompute::selective) out.arg("--recompute-granularity", "selective");
  if (!s.recompute_modules.empty()) {
    std::vector<std::string> names;
    for (RecomputeModule m : s.recompute_modules) names.push_back(to_string(m));
    out.arg("--recompute-modules", fmt::format("{}", fmt::join(names, " ")));
  }
  if (recompute == Recompute::full) {
    out.arg("--recompute-granularity", "full");
    out.arg("--recompute-method", "uniform");
    out.arg("--recompute-num-layers", 1);
  }
}

void framework(ArgsText& out, const Scenario& scenario, const Strategy& s) {
  const FrameworkConfig& f = scenario.framework;
  const bool fsdp = megatron_fsdp(scenario, s);
  if (s.zero_stage == 1) out.arg("--use-distributed-optimizer");
  if (fsdp) {  // Megatron-FSDP v1, its default, turns the distributed optimizer on itself (arguments.py:1129)
    out.arg("--use-megatron-fsdp");
    out.arg("--data-parallel-sharding-strategy", s.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
    out.arg("--ckpt-format", "fsdp_dtensor");  // the only format Megatron-FSDP takes (arguments.py:1169)
  }
  if (f.overlap_grad_reduce) out.arg("--overlap-grad-reduce");
  if ((s.zero_stage == 1 || fsdp) && f.overlap_param_gather && f.overlap_grad_reduce) out.arg("--overlap-param-gather");
  if (f.tp_comm_overlap && s.sequence_parallel && s.tensor_model_parallel_size > 1) out.arg("--tp-comm-overlap");
  if (!f.gradient_accumulation_fusion) out.arg("--no-gradient-accumulation-fusion");
  if (f.cross_entropy_loss_fusion) out.arg("--cross-entropy-loss-fusion");
  if (f.overlap_moe_expert_parallel_comm) out.arg("--overlap-moe-expert-parallel-comm");
  if (f.delay_wgrad_compute) out.arg("--delay-wgrad-compute");
  // Megatron-Core refuses the deferral without pipeline parallelism; a one-stage candidate runs without it.
  if (f.defer_embedding_wgrad_compute && s.pipeline_model_parallel_size > 1) {
    out.arg("--defer-embedding-wgrad-compute");
    if (f.wgrad_deferral_limit > 0) out.arg("--wgrad-deferral-limit", f.wgrad_deferral_limit);
  }
}

// '#' lines: what Megatron derives, and every part of the plan it cannot express (left out above).
void notes(ArgsText& out, const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  out.comment(fmt::format("Megatron derives: data-parallel size {} from the {} ranks launched, {} micro-batches per "
                          "iteration; the vocabulary ({} tokens in twin's model) from the tokenizer.",
                          s.data_parallel_size, s.world_size(), s.num_micro_batches, m.vocab_size));
  if (s.zero_stage >= 2 && !megatron_fsdp(scenario, s))
    out.comment("Not expressible: ZeRO stage 3 as DeepSpeed ran it (zero_implementation deepspeed); Megatron-LM's "
                "closest is Megatron-FSDP (--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
                "--ckpt-format fsdp_dtensor), which gathers a layer ahead instead: no ZeRO argument is given.");
  if (s.zero_stage >= 1 && scenario.framework.overlap_param_gather && !scenario.framework.overlap_grad_reduce)
    out.comment("Not expressible: overlap_param_gather without overlap_grad_reduce (Megatron requires both); "
                "--overlap-param-gather left out.");
  if (scenario.framework.scatter_gather_tensors_in_pipeline && s.pipeline_model_parallel_size > 1 &&
      s.tensor_model_parallel_size > 1 && !s.sequence_parallel)
    out.comment("Not expressible: scatter_gather_tensors_in_pipeline (Megatron-LM of 2021-22 sent each TP rank's "
                "share of a pipeline tensor and all-gathered it on arrival; Megatron-Core sends the whole tensor).");
  if (scenario.framework.deepspeed_bf16_optimizer && s.zero_stage == 1)
    out.comment("Not expressible: deepspeed_bf16_optimizer (DeepSpeed's BF16_Optimizer all-reduces an fp32 gradient "
                "buffer in bf16; Megatron-DeepSpeed runs it with --bf16 --deepspeed --zero-stage 0 and a ds_config of "
                "\"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 0}); the distributed optimizer "
                "below reduce-scatters instead.");
  if (pytorch_fsdp(scenario.framework.name)) {
    const FrameworkConfig& f = scenario.framework;
    const char* kernels = "";
    switch (pytorch_kernels(f)) {
      case PytorchKernels::eager: kernels = "eager PyTorch's kernels, its host time"; break;
      case PytorchKernels::compiled: kernels = "torch.compile's kernels, PyTorch's host time"; break;
      case PytorchKernels::transformer_engine: kernels = "Transformer Engine's kernels, eager PyTorch's host time"; break;
    }
    out.comment(fmt::format("Not expressible: framework.name {} (the plan prices {} and its FSDP's copies); the "
                            "arguments lay out the same parallelism for Megatron-LM, whose step the plan's prediction "
                            "does not describe: simulate the scenario with framework.name megatron-core for that.",
                            to_string(*f.name), kernels));
  }
  if (s.recompute == Recompute::full && recompute_stops_early(scenario.framework))
    out.comment("Not expressible: checkpoint_early_stop (PyTorch's non-reentrant checkpoint does not run a layer's fc2 "
                "and the residual after it again); Megatron's full recompute below runs the whole forward again.");
  if (s.schedule == Schedule::gpipe && s.pipeline_model_parallel_size > 1)
    out.comment("Not expressible: the GPipe schedule. Megatron-LM runs these arguments as 1F1B (same stages, fewer "
                "micro-batches in flight, so less activation memory and the same bubble).");
  if (s.schedule == Schedule::double_strand)
    out.comment("Not expressible: the double-strand schedule (DHeLlam: two micro-batches co-run, their "
                "communication hidden under each other's compute, the model folded over the pipeline). Megatron-LM "
                "runs these arguments as 1F1B, without that overlap.");
  if (scenario.model.moe.imbalance() != 1.0)
    out.comment(fmt::format("twin assumed routing imbalance {} (busiest expert over the mean); it is a property of "
                            "the data and router, not an argument.",
                            m.moe.imbalance()));
  if (m.is_moe() && m.moe.routing && m.moe.routing->distribution != RoutingDistribution::forced &&
      m.moe.routing->distribution != RoutingDistribution::balanced)
    out.comment(fmt::format("twin priced routing {} (model.moe.routing); it is a property of the data and router, "
                            "not an argument.",
                            to_string(m.moe.routing->distribution)));
  if (scenario.training.precision == "fp32") out.comment("fp32 training: Megatron's default, no precision flag.");
}

// The arguments of a uniform strategy under the header of plan `key`, `preamble` comments first.
std::string uniform_args(const Scenario& scenario, const Strategy& strategy, const std::string& key,
                         const std::string& preamble) {
  ArgsText out;
  header(out, scenario, key);
  if (!preamble.empty()) out.comment(preamble);
  use_line(out, scenario, strategy);
  notes(out, scenario, strategy);
  parallelism(out, scenario, strategy);
  batch(out, scenario, strategy);
  model(out, scenario.model, scenario.training.seq_length, scenario.framework.moe_token_dispatcher_type);
  precision_and_optimizer(out, scenario.training, scenario.framework);
  recompute(out, strategy);
  framework(out, scenario, strategy);
  return out.text();
}

// One phase: one strategy for every sequence, the batch packed into rows of the longest length. Its arguments
// describe those rows; twin priced each sequence's own causal attention inside a row.
std::string static_packed_args(const Scenario& scenario, const HotSwitchPlan& plan) {
  const HotSwitchPhase& phase = plan.phases.front();
  return uniform_args(
      phase_scenario(scenario, phase.workload, phase.packs), phase.strategy, plan.key(),
      fmt::format("A static-packed plan: the iteration's {} sequences packed into {} rows of up to {} tokens (HotSPa's "
                  "greedy packing), which the arguments describe; twin priced each sequence's own causal attention "
                  "within its row. Give Megatron the packed rows; its GPT dataset attends across a whole row, which "
                  "costs more than twin priced.",
                  phase.workload.sequences, phase.packs, phase.workload.max_length));
}

}  // namespace

std::string megatron_args(const Scenario& scenario, const Strategy& strategy) {
  return uniform_args(scenario, strategy, strategy.key(), "");
}

std::string megatron_args(const Scenario& scenario, const Candidate& candidate) {
  if (!candidate.plan) return megatron_args(scenario, candidate.strategy);
  if (const auto* packed = candidate.plan_as<HotSwitchPlan>(); packed && packed->phases.size() == 1)
    return static_packed_args(scenario, *packed);
  ArgsText out;
  header(out, scenario, candidate.plan->key());
  std::string why = "its parallel layout differs within one iteration";
  if (candidate.plan_as<HotSwitchPlan>())
    why = "it switches strategy between sequence-length phases within an iteration (HotSPa); Megatron-LM runs one "
          "strategy for every sequence";
  else if (candidate.plan_as<PerLayerPlan>())
    why = "each layer has its own layout, ZeRO stage and recompute (Galvatron); Megatron-LM gives every layer the "
          "same";
  else if (candidate.plan_as<AsymmetricPlan>())
    why = "its pipelines differ in stages, TP sizes and layer counts (HexiScale); Megatron-LM's pipelines are "
          "identical replicas";
  out.comment(fmt::format("Not expressible: the winning plan is a {} plan, and {}. No arguments are given.",
                          candidate.plan->family(), why));
  out.comment("The plan: " + candidate.plan->summary());
  out.comment("ranking.csv lists the uniform strategies, which Megatron-LM can run, with their predicted times.");
  return out.text();
}

}  // namespace twin
