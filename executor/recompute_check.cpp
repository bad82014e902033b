// A full recompute that stops early runs the ops the lowering emits (strategies/lowering_emitter.cpp
// emit_unit_backward: the blocks core/layer.hpp blocks_recomputed_by_early_stop names), each a forward op the
// executor already runs; what it leaves out (FC2 and the residual after it) the backward never reads. The checks
// below keep it to what ran on one GPU (tests/gpu/checkpoint_early_stop_device.sh).
#include "executor/recompute_check.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/framework.hpp"

namespace twin::exec {

// Selective recompute's modules: core attention everywhere; a dense layer's `layernorm` and `mlp` at TP 1, without FP8
// or residual fusion (executor/gpu/dense_block_recompute.cpp), whose runs on one GPU checked them; the others
// (MLA's up projections, the experts' activation, the MoE layer, the shared experts) are priced only.
void check_recompute_modules(const Scenario& scenario, const Strategy& s, const std::string& file,
                             const std::string& at) {
  const ModelConfig& m = scenario.model;
  bool dense_modules = false;
  for (RecomputeModule module : s.recompute_modules) {
    switch (module) {
      case RecomputeModule::core_attn: continue;
      case RecomputeModule::layernorm:
      case RecomputeModule::mlp: dense_modules = true; continue;
      case RecomputeModule::moe_act:
      case RecomputeModule::mla_up_proj:
      case RecomputeModule::moe:
      case RecomputeModule::shared_experts: break;
    }
    throw InputError(file, at + "/recompute_modules",
                     fmt::format("modules among core_attn, layernorm and mlp, got {} (twin execute repeats those; the "
                                 "others are priced by the simulator only)",
                                 to_string(module)));
  }
  if (!dense_modules) return;
  const auto refuse = [&](const std::string& what) {
    throw InputError(file, at + "/recompute_modules",
                     "no layernorm or mlp module " + what + " (twin execute repeats them in dense layers at TP 1, "
                     "without FP8 or residual fusion; the simulator prices the rest)");
  };
  if (s.tensor_model_parallel_size != 1)
    refuse(fmt::format("at tensor_model_parallel_size {}", s.tensor_model_parallel_size));
  if (m.is_moe() || m.mla.enabled()) refuse("in an MoE or MLA model");
  if (scenario.training.fp8) refuse("with training.fp8");
  if (scenario.framework.residual_fusion) refuse("with framework.residual_fusion");
}

namespace {

bool recomputes_whole_layers(const PlanPart& part) {
  if (part.strategy.recompute == Recompute::full) return true;
  for (const UnitExecution& unit : part.layer_units)
    if (unit.weights.recompute == Recompute::full) return true;
  return false;
}

}  // namespace

void check_early_stop(const Plan& plan, const PlanGraphs& lowered, const std::string& file) {
  if (!recompute_stops_early(plan.scenario.framework)) return;
  bool stops = false;
  for (const PlanPart& part : lowered.parts) stops |= recomputes_whole_layers(part);
  if (!stops) return;  // nothing recomputes whole layers: nothing stops early
  const std::string at = "/scenario/framework/checkpoint_early_stop";
  if (plan.scenario.training.fp8)
    throw InputError(file, at,
                     "false with training.fp8 and full recompute (twin execute stops a recompute early in BF16 "
                     "linears; with FP8 linears it is priced by the simulator only)");
  for (const RankClass& rc : lowered.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (const Op& op = rc.op(i); op.recomputed && op.is_communication())
        throw InputError(file, at,
                         fmt::format("false for a plan whose recomputed forward exchanges data ({}: twin execute stops "
                                     "a recompute early where it runs on one GPU's data, TP, CP and EP 1; with "
                                     "exchanges it is priced by the simulator only)",
                                     op_name(op)));
}

}  // namespace twin::exec
