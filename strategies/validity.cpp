// Validity of a strategy, rule by rule, each broken rule explained with the numbers involved.
// The vocabulary needs no rule: like Megatron, the lowering pads it to a multiple of 128 * tp.
#include "strategies/validity.hpp"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include <fmt/format.h>

#include "strategies/steady_state.hpp"

namespace twin {
namespace {

// Megatron's checks of FP8 settings against the strategy (TransformerConfig.__post_init__; arguments.py:1095).
std::optional<std::string> fp8_reason(const Scenario& scenario, const Strategy& s) {
  if (!scenario.training.fp8) return std::nullopt;
  const Fp8Config& fp8 = *scenario.training.fp8;
  const int per_stage = scenario.model.num_layers / s.pipeline_model_parallel_size;
  if (fp8.first_last_layers_bf16 &&
      (fp8.num_layers_at_start_in_bf16 > per_stage || fp8.num_layers_at_end_in_bf16 > per_stage))
    return fmt::format("fp8 num_layers_at_start_in_bf16 {} and num_layers_at_end_in_bf16 {} must be at most the "
                       "layers per pipeline stage {} (Megatron's check)",
                       fp8.num_layers_at_start_in_bf16, fp8.num_layers_at_end_in_bf16, per_stage);
  if (fp8.param_gather && s.zero_stage < 1)
    return std::string("fp8 param_gather needs the distributed optimizer (zero_stage >= 1), as Megatron's does");
  return std::nullopt;
}

// Multi-latent attention is lowered as Megatron-LM runs it under TP (strategies/lowering_mla.hpp), with its own
// ZeRO, at CP 1: Megatron's MLA under CP gathers or exchanges its keys and values by the CP backend of the expanded
// heads, which the lowering does not write yet.
std::optional<std::string> mla_reason(const Scenario& scenario, const Strategy& s) {
  if (!scenario.model.mla.enabled()) return std::nullopt;
  if (s.context_parallel_size > 1)
    return fmt::format("multi-latent attention at context_parallel_size {} is not lowered yet (expected 1: its "
                       "keys' and values' exchange under context parallelism is not modelled)",
                       s.context_parallel_size);
  if (pytorch_fsdp(scenario.framework.name) ||
      (s.zero_stage == 3 && scenario.framework.zero_implementation == ZeroImplementation::deepspeed))
    return std::string("multi-latent attention under PyTorch's FSDP or DeepSpeed's ZeRO-3 is not lowered yet (their "
                       "per-weight gathers know the QKV layer's linears)");
  return std::nullopt;
}

std::optional<std::string> divisible(std::int64_t value, const char* value_name, std::int64_t by, const char* by_name) {
  if (by > 0 && value % by == 0) return std::nullopt;
  return fmt::format("{} {} not divisible by {} {}", value_name, value, by_name, by);
}

}  // namespace

std::optional<std::string> complete_strategy(const Scenario& scenario, Strategy& s) {
  const std::int64_t world = scenario.cluster.total_gpus();
  const std::int64_t model_parallel = s.model_parallel_size();
  if (model_parallel <= 0 || world % model_parallel != 0)
    return fmt::format("world size {} not divisible by tensor*pipeline*context {}", world, model_parallel);
  s.data_parallel_size = static_cast<int>(world / model_parallel);
  const std::int64_t per_micro_step = static_cast<std::int64_t>(s.micro_batch_size) * s.data_parallel_size;
  const std::int64_t global = scenario.training.global_batch_size;
  if (per_micro_step <= 0 || global % per_micro_step != 0)
    return fmt::format("global_batch_size {} not divisible by micro_batch_size*data_parallel_size {}", global,
                       per_micro_step);
  s.num_micro_batches = static_cast<int>(global / per_micro_step);
  if (s.tensor_model_parallel_size == 1) s.sequence_parallel = false;
  return std::nullopt;
}

namespace {

// Megatron's overlapped EP schedule: TransformerConfig.__post_init__'s asserts (transformer_config.py at
// kMegatronCommit) that a candidate can meet, and what twin lowers it for (Megatron-style training, ZeRO below 3).
std::optional<std::string> ep_overlap_reason(const Scenario& scenario, const Strategy& s) {
  const FrameworkConfig& f = scenario.framework;
  if (!f.overlap_moe_expert_parallel_comm) return std::nullopt;
  const char* flag = "framework.overlap_moe_expert_parallel_comm";
  if (s.expert_model_parallel_size < 2)
    return fmt::format("{} needs expert_model_parallel_size > 1 (Megatron's rule: there is no all-to-all to hide)",
                       flag);
  if (f.moe_token_dispatcher_type == MoeTokenDispatcher::allgather)
    return fmt::format("{} needs the alltoall or flex token dispatcher (Megatron's rule)", flag);
  if (s.recompute == Recompute::full) return fmt::format("{} refuses full recompute (Megatron's rule)", flag);
  if (s.schedule != Schedule::interleaved_1f1b &&
      !(s.schedule == Schedule::one_f_one_b && s.pipeline_model_parallel_size == 1))
    return fmt::format("{} needs interleaved-1f1b, or 1f1b on one pipeline stage, not {} (Megatron's rule: virtual "
                       "pipeline stages when pipeline_model_parallel_size > 1)",
                       flag, to_string(s.schedule));
  if (s.zero_stage > 2 || pytorch_fsdp(f.name) || f.zero_implementation == ZeroImplementation::deepspeed)
    return fmt::format("{} is lowered for Megatron's own training with zero_stage 0 to 2, not this one", flag);
  return std::nullopt;
}

// Expert tensor parallelism (Megatron's --expert-tensor-parallel-size) as Megatron allows it and twin lowers it:
// initialize_model_parallel folds each stage's ranks into etp x ep x expert-data (parallel_state.py), each
// expert's FC1/FC2 split over etp ranks (a TE linear divides its width by it), no expert biases under ETP
// (TransformerConfig.__post_init__: "Bias in Moe is only supported when ETP==1"), all at NVIDIA/Megatron-LM d98e8a64dd.
std::optional<std::string> expert_tensor_reason(const Scenario& scenario, const Strategy& s, int domain_gpus) {
  const int etp = s.expert_tensor_parallel_size, ep = s.expert_model_parallel_size;
  if (etp == 1) return std::nullopt;
  const ModelConfig& m = scenario.model;
  const FrameworkConfig& f = scenario.framework;
  if (!m.is_moe()) return fmt::format("expert_tensor_parallel_size {} needs a MoE model (num_experts > 0)", etp);
  if (auto r = divisible(m.moe.ffn_hidden_size, "moe ffn_hidden_size", etp, "expert_tensor_parallel_size")) return r;
  const std::int64_t stage_ranks = std::int64_t{s.tensor_model_parallel_size} * s.context_parallel_size *
                                   s.data_parallel_size;
  if (auto r = divisible(stage_ranks, "tensor*context*data", std::int64_t{etp} * ep,
                         "expert_tensor_parallel_size*expert_model_parallel_size"))
    return r;
  if (m.add_bias_linear)
    return fmt::format("expert_tensor_parallel_size {} with add_bias_linear: Megatron has expert biases only at "
                       "expert_tensor_parallel_size 1",
                       etp);
  if (etp > domain_gpus)
    return fmt::format("expert_tensor_parallel_size {} exceeds the {} GPUs of an NVLink domain: the expert-TP "
                       "gathers and scatters sit on every MoE layer's critical path",
                       etp, domain_gpus);
  if (f.moe_token_dispatcher_type != MoeTokenDispatcher::alltoall)
    return fmt::format("expert_tensor_parallel_size {} is lowered with the alltoall token dispatcher only (the "
                       "allgather and flex dispatchers' gathers over the expert-TP x EP group are not modelled)",
                       etp);
  if (pytorch_fsdp(f.name) || (s.zero_stage == 3 && f.zero_implementation == ZeroImplementation::deepspeed))
    return fmt::format("expert_tensor_parallel_size {} is Megatron's: neither PyTorch's FSDP nor DeepSpeed's ZeRO-3 "
                       "splits experts over tensor parallelism",
                       etp);
  return std::nullopt;
}

// The smallest NVLink domain of the cluster (the node, or a rack's NVLink switch system: nvlink_domain_gpus): on a
// mixed cluster a TP group must fit in it, since the uniform plan runs everywhere.
int smallest_domain_gpus(const Cluster& cluster) {
  int domain_gpus = cluster.node_groups.front().domain_gpus();
  for (const NodeGroup& group : cluster.node_groups) domain_gpus = std::min(domain_gpus, group.domain_gpus());
  return domain_gpus;
}

// Every size at least 1, their product the cluster's GPUs, a TP group inside an NVLink domain.
std::optional<std::string> size_reason(const Scenario& scenario, const Strategy& s) {
  const int tp = s.tensor_model_parallel_size;
  const std::initializer_list<std::pair<int, const char*>> sizes = {
      {tp, "tensor_model_parallel_size"}, {s.pipeline_model_parallel_size, "pipeline_model_parallel_size"},
      {s.context_parallel_size, "context_parallel_size"}, {s.expert_model_parallel_size, "expert_model_parallel_size"},
      {s.expert_tensor_parallel_size, "expert_tensor_parallel_size"},
      {s.virtual_pipeline_model_parallel_size, "virtual_pipeline_model_parallel_size"},
      {s.data_parallel_size, "data_parallel_size"}, {s.micro_batch_size, "micro_batch_size"},
      {s.num_micro_batches, "num_micro_batches"}};
  for (const auto& [value, name] : sizes)
    if (value < 1) return fmt::format("{} {} must be at least 1", name, value);
  if (s.world_size() != scenario.cluster.total_gpus())
    return fmt::format("tensor*pipeline*context*data {} does not match the world size {}", s.world_size(),
                       scenario.cluster.total_gpus());
  if (const int domain_gpus = smallest_domain_gpus(scenario.cluster); tp > domain_gpus)
    return fmt::format(
        "tensor_model_parallel_size {} exceeds the {} GPUs of an NVLink domain (gpus_per_node, or "
        "nvlink_domain_gpus): tensor-parallel collectives sit on the critical path of every layer and would cross "
        "the inter-node network (Megatron allows it; it never pays)",
        tp, domain_gpus);
  return std::nullopt;
}

// Heads, groups and the FFN over TP; the layers over the pipeline's virtual stages.
std::optional<std::string> layer_split_reason(const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  const int tp = s.tensor_model_parallel_size, pp = s.pipeline_model_parallel_size;
  const int vpp = s.virtual_pipeline_model_parallel_size;
  if (auto r = divisible(m.num_attention_heads, "num_attention_heads", tp, "tensor_model_parallel_size")) return r;
  if (auto r = divisible(m.num_query_groups, "num_query_groups", tp, "tensor_model_parallel_size")) return r;
  if (auto r = divisible(m.ffn_hidden_size, "ffn_hidden_size", tp, "tensor_model_parallel_size")) return r;
  // An uneven split may shorten the first and the last virtual stage by one layer each (as Llama 3 does: with
  // one layer per virtual stage, its first holds only the embedding and its last only the output layer).
  if (!s.pipeline_model_parallel_layout.empty()) {
    if (s.schedule == Schedule::double_strand)
      return std::string("double-strand folds the model over its stages: it takes no pipeline_model_parallel_layout");
    return pipeline_layout_reason(s.pipeline_model_parallel_layout, m.num_layers, m.mtp_num_layers, pp, vpp);
  }
  if (const int n = pp * vpp, per = (m.num_layers + n - 1) / n; per * n - m.num_layers > 2)
    return fmt::format("num_layers {} not divisible by pipeline_model_parallel_size*virtual_pipeline_model_parallel_size {}"
                       " (an uneven split may only shorten the first and last virtual stage by one layer each)",
                       m.num_layers, pp * vpp);
  return std::nullopt;
}

// What each schedule needs of the pipeline, its micro-batches and the model.
std::optional<std::string> schedule_reason(const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  const int pp = s.pipeline_model_parallel_size, vpp = s.virtual_pipeline_model_parallel_size;
  if (vpp > 1 && s.schedule != Schedule::interleaved_1f1b)
    return fmt::format("virtual_pipeline_model_parallel_size {} needs the interleaved-1f1b schedule, not {}", vpp,
                       to_string(s.schedule));
  if (s.schedule == Schedule::interleaved_1f1b) {
    if (pp == 1) return std::string("interleaved-1f1b needs pipeline_model_parallel_size > 1");
    if (s.num_micro_batches % pp != 0)
      return fmt::format("interleaved-1f1b needs num_micro_batches {} divisible by pipeline_model_parallel_size {}",
                         s.num_micro_batches, pp);
  }
  if (s.schedule == Schedule::double_strand) {
    if (m.mtp_num_layers > 0)
      return std::string("double-strand with multi-token prediction is not modelled: the folded model's last "
                         "stage is also its first");
    if (m.num_layers % (2 * pp) != 0)
      return fmt::format("double-strand needs num_layers {} divisible by 2*pipeline_model_parallel_size {}: the model "
                         "is folded, each stage holds a run of layers and its mirror of equal length",
                         m.num_layers, 2 * pp);
    if (s.zero_stage > 2)
      return fmt::format("double-strand with zero_stage {} is not modelled: the two strands run different layers at "
                         "once, which would need two layers' weights gathered (DHeLlam uses ZeRO-1)",
                         s.zero_stage);
  }
  if (pp > 1 && s.num_micro_batches < pp)
    return fmt::format("num_micro_batches {} is fewer than pipeline_model_parallel_size {}: stages would sit idle",
                       s.num_micro_batches, pp);
  return std::nullopt;
}

// Context parallelism against the sequence; expert parallelism against the model and the ranks that route.
std::optional<std::string> context_expert_reason(const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  const int tp = s.tensor_model_parallel_size, cp = s.context_parallel_size, ep = s.expert_model_parallel_size;
  if (cp > 1) {
    if (auto r = divisible(scenario.training.seq_length, "seq_length", 2 * cp, "2*context_parallel_size")) return r;
  }
  if (ep > 1 && !m.is_moe())
    return fmt::format("expert_model_parallel_size {} needs a MoE model (num_experts > 0)", ep);
  if (m.is_moe()) {
    if (auto r = divisible(m.moe.num_experts, "num_experts", ep, "expert_model_parallel_size")) return r;
    if (auto r = divisible(static_cast<std::int64_t>(tp) * cp * s.data_parallel_size, "tensor*context*data", ep,
                           "expert_model_parallel_size"))
      return r;
    if (tp > 1 && !s.sequence_parallel)
      return std::string(
          "MoE with tensor_model_parallel_size > 1 needs sequence_parallel: experts are not tensor-parallel, so "
          "each TP rank must route its own share of the tokens");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> invalid_reason(const Scenario& scenario, const Strategy& s) {
  if (auto r = size_reason(scenario, s)) return r;
  if (auto r = fp8_reason(scenario, s)) return r;
  if (auto r = mla_reason(scenario, s)) return r;
  if (s.zero_stage < 0 || s.zero_stage > 3) return fmt::format("zero_stage {} is not one of 0, 1, 2, 3", s.zero_stage);
  if (auto r = layer_split_reason(scenario, s)) return r;
  if (auto r = schedule_reason(scenario, s)) return r;
  if (auto r = context_expert_reason(scenario, s)) return r;
  if (auto r = expert_tensor_reason(scenario, s, smallest_domain_gpus(scenario.cluster))) return r;
  if (auto r = ep_overlap_reason(scenario, s)) return r;
  // The largest graph held at once: the steady state's longer replay where it stands for the whole iteration.
  Strategy replayed = s;
  if (const std::optional<SteadyStateReplay> steady = steady_state_counts(scenario, s))
    replayed.num_micro_batches = steady->second_micro_batches;
  return too_many_ops_reason(scenario, replayed);
}

std::optional<std::string> too_many_ops_reason(const Scenario& scenario, const Strategy& s) {
  if (auto too_large = whole_graph_too_large(scenario, s))
    return *too_large + ": a larger micro_batch_size (fewer micro-batches) or a smaller global batch";
  return std::nullopt;
}

std::optional<std::string> whole_graph_too_large(const Scenario& scenario, const Strategy& s) {
  const std::int64_t ops = estimated_op_count(scenario, s);
  if (ops <= kMaxOpsPerCandidate) return std::nullopt;
  return fmt::format("its op graph would hold about {:.1f} M ops ({} micro-batches x {} layers), more than the limit "
                     "of {} M",
                     ops / 1e6, s.num_micro_batches, scenario.model.num_layers, kMaxOpsPerCandidate / 1000000);
}

std::int64_t estimated_op_count(const Scenario& scenario, const Strategy& s) {
  const ModelConfig& m = scenario.model;
  // Per layer and micro-batch, forward and backward: about 40 ops (36 to 48 in the 405B, 530B and 1T
  // benchmark graphs, docs/PERFORMANCE.md); TE's userbuffers split four linears into about tp chunks and
  // steps each way, the CP ring adds a block and a send per rank, MoE the routing and expert ops.
  double per_layer = 48;
  if (scenario.framework.tp_comm_overlap && s.sequence_parallel) per_layer += 12.0 * s.tensor_model_parallel_size;
  if (s.context_parallel_size > 1) per_layer += 6.0 * s.context_parallel_size;
  if (m.is_moe()) per_layer += 24;
  if (s.expert_tensor_parallel_size > 1) per_layer += 6;  // the expert-TP gathers and scatters, each way
  if (s.recompute == Recompute::full) per_layer *= 1.5;
  const double ops = double(s.num_micro_batches) * double(m.transformer_layers() + 2) * per_layer;
  return ops > 1e15 ? std::int64_t{1000000000000000} : static_cast<std::int64_t>(ops);
}

}  // namespace twin
