// Argument names and spellings are Megatron-LM's (megatron/training/arguments.py of core_r0.13.0, checked
// against its main branch of 2026-08): e.g. --cp-comm-type takes "allgather" where twin says "all_gather",
// and --normalization "RMSNorm". Megatron's own argument checks shape what is written: sequence parallelism
// only with TP > 1 (Megatron turns it off otherwise), --tp-comm-overlap only with it, --overlap-param-gather
// only with the distributed optimizer and --overlap-grad-reduce.
#include "reports/megatron_args.hpp"

#include <vector>

#include <fmt/format.h>

#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
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
  out.comment(fmt::format("Megatron-LM pretrain_gpt.py arguments for twin's plan {} of \"{}\".", key, scenario.name));
  out.comment("Use: torchrun ... pretrain_gpt.py $(grep -v '^#' megatron_args.txt) --data-path ... --tokenizer-type ...");
}

std::string cp_comm_type_name(CpCommType type) { return type == CpCommType::all_gather ? "allgather" : "p2p"; }

void parallelism(ArgsText& out, const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  out.arg("--tensor-model-parallel-size", s.tensor_model_parallel_size);
  out.arg("--pipeline-model-parallel-size", s.pipeline_model_parallel_size);
  out.arg("--context-parallel-size", s.context_parallel_size);
  if (m.is_moe()) {
    out.arg("--expert-model-parallel-size", s.expert_model_parallel_size);
    out.arg("--expert-tensor-parallel-size", 1);  // twin's experts are split over EP, not TP-sharded
  }
  if (s.sequence_parallel && s.tensor_model_parallel_size > 1) out.arg("--sequence-parallel");
  if (s.context_parallel_size > 1) out.arg("--cp-comm-type", cp_comm_type_name(scenario.framework.cp_comm_type));

  // Layers over (virtual) pipeline stages. An uneven split (Llama 3's) leaves one layer off the last
  // virtual stage, or also one off the first: Megatron counts the loss, or also the embedding, as a layer.
  if (s.schedule == Schedule::double_strand) return;  // DHeLlam's folded chunks: said by a comment instead
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

void model(ArgsText& out, const ModelConfig& m) {
  out.arg("--num-layers", m.num_layers);
  out.arg("--hidden-size", m.hidden_size);
  out.arg("--ffn-hidden-size", m.ffn_hidden_size);
  out.arg("--num-attention-heads", m.num_attention_heads);
  if (m.num_query_groups != m.num_attention_heads) {
    out.arg("--group-query-attention");
    out.arg("--num-query-groups", m.num_query_groups);
  }
  out.arg("--kv-channels", m.kv_channels);
  out.arg("--max-position-embeddings", m.max_position_embeddings);
  out.arg("--position-embedding-type", m.position_embedding_rope ? "rope" : "learned_absolute");
  out.arg("--normalization", m.normalization == Normalization::rmsnorm ? "RMSNorm" : "LayerNorm");
  if (m.activation == Activation::swiglu) out.arg("--swiglu");  // GeLU is Megatron's default
  if (m.activation == Activation::squared_relu) out.arg("--squared-relu");
  if (m.untie_embeddings_and_output_weights) out.arg("--untie-embeddings-and-output-weights");
  if (!m.add_bias_linear) out.arg("--disable-bias-linear");
  // Megatron's defaults are 0.1 each; Llama-style models train without dropout.
  out.arg("--hidden-dropout", m.hidden_dropout);
  out.arg("--attention-dropout", m.attention_dropout);
  out.arg("--attention-backend", to_string(m.attention_backend));
  if (m.is_moe()) {
    out.arg("--num-experts", m.moe.num_experts);
    out.arg("--moe-router-topk", m.moe.top_k);
    out.arg("--moe-ffn-hidden-size", m.moe.ffn_hidden_size);
    if (m.moe.layer_freq != 1) out.arg("--moe-layer-freq", m.moe.layer_freq);
    out.arg("--moe-token-dispatcher-type", "alltoall");  // twin prices all-to-all dispatch and combine
  }
}

void precision_and_optimizer(ArgsText& out, const TrainingConfig& training) {
  if (training.precision == "bf16") out.arg("--bf16");
  if (training.precision == "fp16") out.arg("--fp16");
  out.arg("--optimizer", training.optimizer);
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
}

void recompute(ArgsText& out, Recompute recompute) {
  if (recompute == Recompute::selective) out.arg("--recompute-granularity", "selective");
  if (recompute == Recompute::full) {
    out.arg("--recompute-granularity", "full");
    out.arg("--recompute-method", "uniform");
    out.arg("--recompute-num-layers", 1);
  }
}

void framework(ArgsText& out, const FrameworkConfig& f, const Strategy& s) {
  const bool distributed_optimizer = s.zero_stage == 1;
  if (distributed_optimizer) out.arg("--use-distributed-optimizer");
  if (f.overlap_grad_reduce) out.arg("--overlap-grad-reduce");
  if (distributed_optimizer && f.overlap_param_gather && f.overlap_grad_reduce) out.arg("--overlap-param-gather");
  if (f.tp_comm_overlap && s.sequence_parallel && s.tensor_model_parallel_size > 1) out.arg("--tp-comm-overlap");
  if (!f.gradient_accumulation_fusion) out.arg("--no-gradient-accumulation-fusion");
  if (f.cross_entropy_loss_fusion) out.arg("--cross-entropy-loss-fusion");
}

// '#' lines: what Megatron derives, and every part of the plan it cannot express (left out above).
void notes(ArgsText& out, const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  out.comment(fmt::format("Megatron derives: data-parallel size {} from the {} ranks launched, {} micro-batches per "
                          "iteration; the vocabulary ({} tokens in twin's model) from the tokenizer.",
                          s.data_parallel_size, s.world_size(), s.num_micro_batches, m.vocab_size));
  if (s.zero_stage >= 2) {
    out.comment(fmt::format(
        "Not expressible: ZeRO stage {} ({}). Megatron-LM's distributed optimizer is ZeRO 1; its closest is Megatron "
        "FSDP (--use-custom-fsdp, later --use-megatron-fsdp, with --data-parallel-sharding-strategy {}), which twin "
        "did not simulate.",
        s.zero_stage, s.zero_stage == 2 ? "gradients sharded" : "gradients and parameters sharded",
        s.zero_stage == 2 ? "optim_grads" : "optim_grads_params"));
  }
  if (s.zero_stage == 1 && scenario.framework.overlap_param_gather && !scenario.framework.overlap_grad_reduce)
    out.comment("Not expressible: overlap_param_gather without overlap_grad_reduce (Megatron requires both); "
                "--overlap-param-gather left out.");
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
  if (scenario.training.precision == "fp32") out.comment("fp32 training: Megatron's default, no precision flag.");
}

}  // namespace

std::string megatron_args(const Scenario& scenario, const Strategy& strategy) {
  ArgsText out;
  header(out, scenario, strategy.key());
  notes(out, scenario, strategy);
  parallelism(out, scenario, strategy);
  batch(out, scenario, strategy);
  model(out, scenario.model);
  precision_and_optimizer(out, scenario.training);
  recompute(out, strategy.recompute);
  framework(out, scenario.framework, strategy);
  return out.text();
}

std::string megatron_args(const Scenario& scenario, const Candidate& candidate) {
  if (!candidate.plan) return megatron_args(scenario, candidate.strategy);
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
