// Each refusal names the feature whose kernels keep bf16 gradients only. The reduction's dtype is checked against
// the graph: a plan with no gradient reduction over data parallelism (one replica) reduces nothing, so its
// reduce_dtype cannot differ from anything that runs.
#include "executor/main_gradient_check.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/framework.hpp"
#include "executor/parameters.hpp"
#include "executor/pipeline_reduction.hpp"
#include "strategies/families/rank_plan.hpp"

namespace twin::exec {
namespace {

const char* dtype_name(int bytes) { return bytes == 4 ? "float32" : "bfloat16"; }

bool reduces_over_data(const PlanGraphs& lowered) {
  for (const RankClass& rc : lowered.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).role == OpRole::grad_reduce) return true;
  return false;
}

// The model and training features whose kernels write bf16 weight gradients only.
const char* bf16_only_feature(const Plan& plan) {
  const ModelConfig& model = plan.scenario.model;
  if (model.mla.enabled()) return "multi-latent attention";
  if (plan.scenario.training.fp8) return "FP8 linears";
  if (model.attention_sinks) return "attention sinks";
  return nullptr;
}

// ZeRO >= 2 keeps gradient shards, which the executor adds bf16 reductions into; hot switching re-shards bf16
// gradients between its parts; an asymmetric plan reduces packed bf16 gradients across its pipelines.
void check_plan_shape(const PlanGraphs& lowered, const std::string& file) {
  const std::string expected = "\"bfloat16\" or absent";
  if (lowered.parts.size() > 1)
    throw InputError(file, "/scenario/framework/main_grad_dtype",
                     expected + " with a plan of several parts (twin execute re-shards bf16 gradients between a "
                                "hot-switching plan's parts)");
  if (!plan_pipeline_reduction(lowered).empty())
    throw InputError(file, "/scenario/framework/main_grad_dtype",
                     expected + " with gradients reduced across pipelines of different shapes (twin execute packs "
                                "them in bf16)");
  for (int rank : layout_check(lowered).ranks)
    for (const PlanPart& part : rank_parts(lowered, rank))
      for (const ParameterUnitLayout& unit : plan_parameter_units(part, rank, 0))
        if (unit.shards_gradients())
          throw InputError(file, "/strategy/zero_stage",
                           "0 or 1 with fp32 main gradients (framework.main_grad_dtype float32; twin execute adds "
                           "ZeRO-2/3's reduced gradients into bf16 shards)");
}

}  // namespace

void check_main_gradient(const Plan& plan, const PlanGraphs& lowered, const std::string& file) {
  const FrameworkConfig& framework = plan.scenario.framework;
  const int main_bytes = main_gradient_bytes(framework), reduce_bytes = gradient_reduce_bytes(framework);
  if (main_bytes != reduce_bytes && reduces_over_data(lowered))
    throw InputError(file, "/scenario/framework/reduce_dtype",
                     fmt::format("\"{}\", the main gradient's dtype (twin execute reduces the main gradients over "
                                 "data parallelism as they are kept, as Megatron reduces its main_grad buffer; got "
                                 "main_grad_dtype {} and reduce_dtype {})",
                                 dtype_name(main_bytes), dtype_name(main_bytes), dtype_name(reduce_bytes)));
  if (main_bytes == 2) return;
  if (const char* feature = bf16_only_feature(plan))
    throw InputError(file, "/scenario/framework/main_grad_dtype",
                     fmt::format("\"bfloat16\" or absent with {} (its kernels write bf16 weight gradients only; "
                                 "fp32 main gradients run for dense and MoE models)", feature));
  check_plan_shape(lowered, file);
}

}  // namespace twin::exec
