// The model, the framework switches and the precision recipe; per part whose strategy the plan states (a uniform
// or per-layer plan's, or each hot-switching phase's) the search's validity rules, memory, strategy and the switch
// into it; the rules the plan's
// family adds (strategies/families/rank_plan.hpp); the parameter layout of every part a GPU runs; the op
// bindings of every rank class, which refuse what they do not run; and last where ZeRO's whole buffers live.
#include "executor/plan_check.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "executor/fp8_plan_check.hpp"
#include "executor/main_gradient_check.hpp"
#include "executor/model_support.hpp"
#include "executor/op_binding.hpp"
#include "executor/parameters.hpp"
#include "executor/pipeline_reduction.hpp"
#include "executor/recompute_check.hpp"
#include "executor/resharding.hpp"
#include "executor/weight_residency.hpp"
#include "strategies/families/rank_plan.hpp"
#include "strategies/layout_switch.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/memory.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"

namespace twin::exec {

namespace {

// Multi-latent attention runs at TP 1 and CP 1: under TP its down projections and latent norms are replicated
// (Megatron's duplicated linears), and their gradients, partial per rank's heads, would need a sum over TP that
// twin execute does not run; its ring attention would need the expanded keys' exchange.
void check_mla(const ModelConfig& m, const Strategy& s, const std::string& file) {
  if (!m.mla.enabled() || (s.tensor_model_parallel_size == 1 && s.context_parallel_size == 1)) return;
  throw InputError(file, "/scenario/model/mla",
                   fmt::format("a plan of tensor_model_parallel_size 1 and context_parallel_size 1 with multi-latent "
                               "attention, got {} and {} (twin execute runs MLA on whole heads: the replicated down "
                               "projections and latent norms would need their gradients summed over TP, and context "
                               "parallelism's ring does not carry MLA's keys; the simulator prices both)",
                               s.tensor_model_parallel_size, s.context_parallel_size));
}

// The attention variants twin execute runs in whole-sequence attention only: context parallelism's ring builds its
// blocks' calls itself (gpu/ring_attention.hpp, executor/gpu/context_ring_run.cpp) and passes causal or full blocks
// of keys, whose window cut would depend on the step, with no cap, no sink in the log-sum-exp it merges, no dropout.
void check_whole_sequence_attention(const ModelConfig& m, const Strategy& s, const std::string& file) {
  if (s.context_parallel_size == 1) return;
  struct Variant {
    bool present;
    const char* key;
    const char* what;
  };
  const Variant variants[] = {{m.window_size > 0, "window_size", "sliding-window attention"},
                              {m.attention_softcap > 0, "attention_softcap", "soft-capped attention scores"},
                              {m.attention_sinks, "attention_sinks", "attention sinks"},
                              {m.attention_dropout > 0, "attention_dropout", "attention dropout"},
                              {!is_fused_attention(m.attention_backend), "attention_backend", "unfused attention"}};
  for (const Variant& v : variants)
    if (v.present)
      throw InputError(file, std::string("/scenario/model/") + v.key,
                       fmt::format("a plan of context_parallel_size 1 with {}, got {} (twin execute runs it in "
                                   "whole-sequence attention only, not in context parallelism's ring blocks; the "
                                   "simulator prices the ring with it)",
                                   v.what, s.context_parallel_size));
}

// Post norms run at TP 1: under TP the post norm reads its branch after the row-parallel linear's reduction, a
// path no run on two or more GPUs has checked yet (docs/EXECUTOR.md "Gemma and Nemotron shapes").
void check_post_norms(const ModelConfig& m, const Strategy& s, const std::string& file) {
  if (!m.post_norms || s.tensor_model_parallel_size == 1) return;
  throw InputError(file, "/scenario/model/post_norms",
                   fmt::format("a plan of tensor_model_parallel_size 1 with post norms, got {} (twin execute has run "
                               "post norms on whole branches only; the simulator prices them under TP)",
                               s.tensor_model_parallel_size));
}

// Shared experts run at TP 1: their FC1's input gradient is added to the routed experts' in place, before any TP
// reduction (executor/parameters.cpp refuses to lay them out under TP; this names it before any layout is tried).
void check_shared_experts(const ModelConfig& m, const Strategy& s, const std::string& file) {
  if (!m.is_moe() || m.moe.shared_expert_ffn_hidden_size == 0 || s.tensor_model_parallel_size == 1) return;
  throw InputError(file, "/scenario/model/moe/shared_expert_ffn_hidden_size",
                   fmt::format("a plan of tensor_model_parallel_size 1 with shared experts, got {} (twin execute adds "
                               "their input gradient to the routed experts' before any TP reduction; the simulator "
                               "prices them under TP)",
                               s.tensor_model_parallel_size));
}

// An expert capacity runs on one EP rank: each rank would drop its own copies before the dispatch as Megatron's
// router does, but the exchange's counts under EP are the routed copies' (no run on two or more GPUs has checked it).
void check_expert_capacity(const ModelConfig& m, const Strategy& s, const std::string& file) {
  if (!m.is_moe() || !m.moe.expert_capacity_factor || s.expert_model_parallel_size == 1) return;
  throw InputError(file, "/scenario/model/moe/expert_capacity_factor",
                   fmt::format("a plan of expert_model_parallel_size 1 with an expert capacity, got {} (twin execute "
                               "drops copies on one EP rank; the simulator prices the capacity under EP)",
                               s.expert_model_parallel_size));
}

// The model's variants twin execute runs under some layouts only, under `s`.
void check_model_under(const ModelConfig& m, const Strategy& s, const std::string& file) {
  check_mla(m, s, file);
  check_whole_sequence_attention(m, s, file);
  check_post_norms(m, s, file);
  check_shared_experts(m, s, file);
  check_expert_capacity(m, s, file);
}

// What the executor refuses of one strategy (a uniform or per-layer plan's, or a hot-switching phase's)
// whose fields sit at `at` in the plan file.
void check_strategy(const Plan& plan, const Scenario& scenario, const Strategy& s, const MemoryEstimate& memory,
                    const std::string& file, const std::string& at) {
  check_model_under(scenario.model, s, file);
  // The executor's expert exchange is the all-to-all (executor/expert_exchange.hpp): a plan priced with another
  // dispatcher would run as the all-to-all and be measured against the wrong prediction.
  if (s.expert_model_parallel_size > 1 && scenario.framework.moe_token_dispatcher_type != MoeTokenDispatcher::alltoall)
    throw InputError(file, "/scenario/framework/moe_token_dispatcher_type",
                     "alltoall with expert_model_parallel_size > 1 (twin execute exchanges tokens by all-to-all; "
                     "the allgather and flex dispatchers are priced by the simulator only)");
  if (s.expert_tensor_parallel_size != 1)
    throw InputError(file, at + "/expert_tensor_parallel_size",
                     fmt::format("1, got {} (twin execute runs whole experts; expert TP is priced by the simulator "
                                 "only)",
                                 s.expert_tensor_parallel_size));
  if (!s.pipeline_model_parallel_layout.empty())
    throw InputError(file, at + "/pipeline_model_parallel_layout",
                     "a plan without a pipeline layout (twin execute runs the even split of layers; a stated "
                     "layout's virtual stages are priced by the simulator only, not yet run on GPUs)");
  check_recompute_modules(scenario, s, file, at);
  const std::string oom = out_of_memory_reason(memory, scenario.cluster.node_groups.front().gpu.memory_GiB);
  if (!oom.empty()) throw InputError(file, at, "a plan that fits; the simulator says it does not: " + oom);
  if (s.context_parallel_size > 1 && scenario.framework.cp_comm_type != CpCommType::p2p)
    throw InputError(file, "/scenario/framework/cp_comm_type",
                     "p2p with context_parallel_size > 1 (twin execute runs context parallelism as a ring; the "
                     "all-gathered form is priced by the simulator only)");
  if (!scenario.framework.cross_entropy_loss_fusion && s.tensor_model_parallel_size > 1)
    throw InputError(file, "/scenario/framework/cross_entropy_loss_fusion",
                     fmt::format("true, or a plan of tensor_model_parallel_size 1, got {} (twin execute runs the "
                                 "unfused loss over a whole vocabulary; under TP its all-reduces fall between its "
                                 "passes, which no run on GPUs has checked yet)",
                                 s.tensor_model_parallel_size));
  if (plan.scenario.framework.tp_comm_overlap && s.sequence_parallel && s.tensor_model_parallel_size > 1)
    throw InputError(file, "/scenario/framework/tp_comm_overlap",
                     "false (twin execute does not run Transformer Engine's userbuffers overlap yet)");
  if (scenario.framework.overlap_moe_expert_parallel_comm)
    throw InputError(file, "/scenario/framework/overlap_moe_expert_parallel_comm",
                     "false (twin execute does not run Megatron's combined 1F1B with all-to-all overlap yet; the "
                     "simulator prices it)");
  if (!scenario.framework.gradient_accumulation_fusion && s.zero_stage >= 2)
    throw InputError(file, "/scenario/framework/gradient_accumulation_fusion",
                     fmt::format("true under zero_stage {} (twin execute adds weight gradients written apart into "
                                 "gradients kept over the step, ZeRO 0 and 1; not yet run on GPUs with sharded "
                                 "gradients)",
                                 s.zero_stage));
  if (s.zero_stage == 3 && scenario.framework.zero_implementation != ZeroImplementation::megatron)
    throw InputError(file, "/scenario/framework/zero_implementation",
                     "megatron (DeepSpeed's ZeRO-3 is priced by the simulator only)");
  if (scenario.framework.defer_embedding_wgrad_compute && s.pipeline_model_parallel_size > 1)
    throw InputError(file, "/scenario/framework/defer_embedding_wgrad_compute",
                     "false with pipeline parallelism (twin execute runs the output layer's weight gradient in each "
                     "micro-batch's backward; the deferral to the pipeline's drain is priced by the simulator only)");
}

// Each part whose strategy the plan file states (a uniform or per-layer plan's, each hot-switching phase's): what
// the executor refuses of the strategy (at the key it refuses), the search's rules (strategies/validity.hpp, their
// one statement, the key-value groups TP must divide among them: a plan file may pin a strategy the search never
// offers), and the switch into it from the part before.
void check_parts(const Plan& plan, const PlanGraphs& lowered, const std::string& file) {
  // Each part's runtime routes with its own copy of the biases (executor/gpu/moe_block.hpp): one bias across
  // phases is not built.
  if (lowered.parts.size() > 1 && plan.scenario.model.is_moe() && plan.scenario.model.moe.router_expert_bias)
    throw InputError(file, "/scenario/model/moe/router_expert_bias",
                     "false in a plan of several phases (twin execute keeps aux-loss-free balancing's biases per "
                     "phase, where Megatron keeps one per layer)");
  for (std::size_t p = 0; p < lowered.parts.size(); ++p) {
    const PlanPart& part = lowered.parts[p];
    const std::string at = part_strategy_path(lowered, p);
    if (at.empty()) continue;  // the family checks it (check_family_rules)
    check_strategy(plan, part.scenario, part.strategy, part.memory, file, at);
    if (const std::optional<std::string> invalid = invalid_reason(part.scenario, part.strategy))
      throw InputError(file, at, "a strategy the search could offer, not one that breaks its rule: " + *invalid);
    if (part.strategy.context_parallel_size > 1 && !part.packs.empty())
      throw InputError(file, at + "/context_parallel_size",
                       "1 in a phase whose rows pack several sequences (twin execute shards whole sequences over "
                       "context-parallel ranks)");
    // A phase in another layout than the one before it is switched into: every element it needs must be held
    // before (executor/resharding.hpp refuses experts, a tied table's copy, a vocabulary padded otherwise).
    const PlanPart& before = lowered.parts[p == 0 ? lowered.parts.size() - 1 : p - 1];
    if (lowered.parts.size() > 1 && !same_parameter_layout(before.strategy, part.strategy)) {
      try {
        plan_resharding(before, part, plan.scenario.cluster, p > 0);
      } catch (const std::invalid_argument& error) {
        throw InputError(file, at, std::string("a layout twin execute can switch into from the phase before: ") +
                                       error.what());
      }
    }
  }
}

// The parameter layout of every part a GPU runs (of the GPUs the family names), the model's variants under its
// strategy (an asymmetric plan's stages, which its file's strategy does not state), and the gradients summed across
// replicas that shard them differently.
void check_layouts(const PlanGraphs& lowered, const std::string& file) {
  const LayoutCheck check = layout_check(lowered);
  try {
    for (int rank : check.ranks)
      for (const PlanPart& part : rank_parts(lowered, rank)) {
        check_model_under(part.scenario.model, part.strategy, file);
        plan_parameter_units(part, rank, 0);
      }
    plan_pipeline_reduction(lowered);
  } catch (const std::invalid_argument& error) {
    throw InputError(file, check.path, check.expected + ": " + error.what());
  }
}

// A model feature twin execute has no weights or kernels for (executor/model_support.hpp) is refused at its own
// key, rather than run as another model.
void check_architecture(const ModelConfig& m, const std::string& file) {
  if (const auto unsupported = first_unsupported_feature(m))
    throw InputError(file, "/scenario/model/" + unsupported->path,
                     fmt::format("expected a model without {} (twin execute does not run it yet; the simulator "
                                 "prices it)", unsupported->feature));
}

// Without gradient accumulation fusion a dense linear's bf16 GEMM writes its weight gradient apart and an op adds it
// (executor/gpu/dense_block_accumulation.cpp); the experts block and MLA's steps write their weight gradients
// themselves.
void check_gradient_accumulation(const Plan& plan, const std::string& file) {
  if (plan.scenario.framework.gradient_accumulation_fusion) return;
  const ModelConfig& model = plan.scenario.model;
  const char* without_op = model.is_moe()             ? "a model with experts"
                           : model.mla.enabled()      ? "multi-latent attention"
                           : plan.scenario.training.fp8 ? "FP8 linears"
                                                        : nullptr;
  if (without_op)
    throw InputError(file, "/scenario/framework/gradient_accumulation_fusion",
                     fmt::format("true with {} (twin execute adds a weight gradient written apart for the dense "
                                 "linears' bf16 GEMMs only)",
                                 without_op));
}

// What every plan trains with: the framework switches, the activation and the precision recipe twin execute runs.
void check_training(const Plan& plan, const std::string& file) {
  if (pytorch_fsdp(plan.scenario.framework.name))
    throw InputError(file, "/scenario/framework/name",
                     "\"twin\" or \"megatron-core\" (a pytorch-fsdp2 or pytorch-fsdp plan prices PyTorch's own kernels "
                     "and copies: run it with PyTorch; twin execute runs twin's kernels in Megatron's layout)");
  // The unfused loss runs as Megatron's passes over fp32 logits (core/unfused_loss.hpp), at TP 1 (check_strategy).
  if (!plan.scenario.framework.cross_entropy_loss_fusion && plan.scenario.model.final_logit_softcap > 0)
    throw InputError(file, "/scenario/framework/cross_entropy_loss_fusion",
                     "true with soft-capped final logits (twin execute caps them inside the fused loss only)");
  if (plan.scenario.framework.scatter_gather_tensors_in_pipeline)
    throw InputError(file, "/scenario/framework/scatter_gather_tensors_in_pipeline",
                     "false (twin execute sends whole pipeline tensors, as Megatron-Core does)");
  if (plan.scenario.framework.deepspeed_bf16_optimizer)
    throw InputError(file, "/scenario/framework/deepspeed_bf16_optimizer",
                     "false (twin execute runs Megatron's optimizers, not DeepSpeed's BF16_Optimizer)");
  const TrainingConfig& training = plan.scenario.training;
  check_fp8_plan(plan, file);
  const ModelConfig& model = plan.scenario.model;
  check_gradient_accumulation(plan, file);
  if (!model.position_embedding_rope && training.seq_length > model.max_position_embeddings)
    throw InputError(file, "/scenario/training/seq_length",
                     fmt::format("at most max_position_embeddings ({}): the learned position table has a row per "
                                 "position, got {}", model.max_position_embeddings, training.seq_length));
  // Unfused attention's kernels move eight scores at a time (gpu/kernels/causal_softmax.cu).
  if (!is_fused_attention(model.attention_backend) && training.seq_length % 8 != 0)
    throw InputError(file, "/scenario/training/seq_length",
                     fmt::format("a multiple of 8 with unfused attention, got {}", training.seq_length));
  if (training.precision != "bf16")
    throw InputError(file, "/scenario/training/precision", "bf16 (twin execute trains in bf16 mixed precision)");
  if (training.optimizer != "adam")
    throw InputError(file, "/scenario/training/optimizer", "adam (twin execute runs AdamW)");
  const OptimizerPrecision& precision = training.optimizer_precision;
  for (const auto& [key, dtype] : {std::pair{"main_params_dtype", precision.main_params},
                                   std::pair{"exp_avg_dtype", precision.exp_avg},
                                   std::pair{"exp_avg_sq_dtype", precision.exp_avg_sq}})
    if (!executor_stores(dtype))
      throw InputError(file, std::string("/scenario/training/") + key,
                       "fp32 or bf16 (twin execute stores optimizer state in these; " + to_string(dtype) +
                           " is priced by the simulator only)");
}

// The executor's exchange sends one block per (peer, local expert) (executor/gpu/moe_block.cpp, gpu/row_exchange.hpp):
// an all-to-all the lowering says goes in other blocks (Megatron-Core's or PyTorch's all_to_all_single, one per peer)
// would run as the executor's and be measured against the wrong prediction. The op says it; this reads it.
void check_exchange_blocks(const Plan& plan, const PlanGraphs& lowered, const std::string& file) {
  for (const RankClass& rc : lowered.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.kind != OpKind::all_to_all || op.group != GroupKind::expert) continue;
      const int local_experts = plan.scenario.model.moe.num_experts / op.group_size;
      if (op.blocks_per_peer == local_experts) continue;
      throw InputError(file, "/scenario/framework/name",
                       fmt::format("a framework whose expert exchange sends one block per local expert, as twin "
                                   "execute does ({} per peer; the plan's sends {}: the simulator prices that "
                                   "framework's all_to_all_single, twin execute does not run it)",
                                   local_experts, op.blocks_per_peer));
    }
}

// Megatron-Core's experts run a clamped GLU's clamp and their FC2 bias as eager kernels, which the simulator prices
// for that framework (strategies/megatron_expert_passes.hpp); twin execute fuses both into its own kernels.
void check_expert_eager_passes(const Plan& plan, const std::string& file) {
  const lowering::RankShapes shapes = lowering::rank_shapes(plan.scenario, plan.strategy);
  if (shapes.megatron_expert_clamp || shapes.megatron_expert_bias)
    throw InputError(file, "/scenario/framework/name",
                     "\"twin\" for experts with biases or a clamped GLU (the plan prices Megatron-Core's eager clamp "
                     "and FC2 bias; twin execute fuses them into its own kernels)");
}

// ZeRO >= 2 keeps whole gradients and ZeRO-3 whole weights only between the ops that need them
// (executor/weight_residency.hpp), read off each rank class's ops: a graph that would read a unit's weights before
// its gather or write its gradients after its last reduction is refused here rather than failing on the GPU.
void check_weight_residency(const Plan& plan, const PlanGraphs& lowered, const std::string& file) {
  const bool tied = !plan.scenario.model.untie_embeddings_and_output_weights;
  const LayoutCheck check = layout_check(lowered);
  for (int rank : check.ranks)
    for (const PlanPart& part : rank_parts(lowered, rank)) {
      ShardedUnits sharded;
      for (const ParameterUnitLayout& unit : plan_parameter_units(part, rank, 0)) sharded.add(unit);
      if (sharded.empty()) continue;
      const RankClass& rc = lowered.graph.classes.at(static_cast<std::size_t>(part.class_of_rank.at(rank)));
      const int stage = coordinates_of(part.strategy, part.layout_rank(rank)).pp;
      try {
        WeightResidency(rc, bind_ops(rc, tied, plan.scenario.model.mla.enabled()), sharded,
                        StageWeights{tied, stage_holds_embedding(part.strategy, stage)});
      } catch (const std::logic_error& error) {
        throw InputError(file, "/strategy/zero_stage",
                         std::string("a plan whose ZeRO-sharded buffers twin execute holds whole where its ops "
                                     "use them: ") + error.what());
      }
    }
}

}  // namespace

void check_executable_plan(const Plan& plan, const std::string& file) {
  // The model first: a variant the executor has no kernels and no weights for is named at its own key, before
  // the parameter layout is tried.
  check_architecture(plan.scenario.model, file);
  check_model_under(plan.scenario.model, plan.strategy, file);
  check_training(plan, file);
  const PlanGraphs lowered = plan_graphs(plan, file);
  check_parts(plan, lowered, file);
  check_family_rules(plan, lowered, file);
  check_main_gradient(plan, lowered, file);
  check_early_stop(plan, lowered, file);
  check_layouts(lowered, file);
  check_exchange_blocks(plan, lowered, file);
  check_expert_eager_passes(plan, file);
  try {
    for (const RankClass& rc : lowered.graph.classes)
      bind_ops(rc, !plan.scenario.model.untie_embeddings_and_output_weights, plan.scenario.model.mla.enabled());
  } catch (const std::invalid_argument& error) {
    throw InputError(file, "/scenario/model", std::string("a model and strategy twin execute runs: ") + error.what());
  }
  check_weight_residency(plan, lowered, file);
}

}  // namespace twin::exec
