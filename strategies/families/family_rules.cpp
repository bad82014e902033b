// The rules each family adds to twin execute's plan check, at the family plan's own keys: a per-layer plan's
// layers in blocks of whole samples (its embedding and output layer beside a Ulysses layer may hold a shard of one),
// an asymmetric plan's stages each fitting its own GPU.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/error.hpp"
#include "strategies/families/rank_plan.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/per_layer/per_layer_edges.hpp"

namespace twin {
namespace {

const char* const kNoUserbuffers = "false (twin execute does not run Transformer Engine's userbuffers overlap yet)";

// A per-layer plan runs its layers each in its own layout (Megatron TP group or Ulysses group, data group, ZeRO
// stage, recompute), split over the stages as the plan splits them.
void check_per_layer(const Plan& plan, const PerLayerPlan& layers, const std::string& file) {
  const int gpus = stage_gpus(plan.scenario, layers);
  if (plan.scenario.model.is_moe())
    throw InputError(file, "/family_plan/family", "a dense model under a per-layer plan (twin execute runs MoE "
                                                  "models under uniform plans)");
  for (std::size_t i = 0; i < layers.layers.size(); ++i) {
    const LayerStrategy& layer = layers.layers[i];
    // Whole sequences for every block of GPUs, and for the blocks the embedding or output layer beside the layer
    // cuts its rows from (beside a Ulysses layer each GPU's shard of the layer's block: part of a sample may be).
    const bool edge = i == 0 || i + 1 == layers.layers.size();
    try {
      block_samples(layer.layout, gpus, layers.stage_micro_batch, 0);
      if (edge) edge_rows(layer.layout, gpus, layers.stage_micro_batch, 0);
    } catch (const std::invalid_argument& error) {
      throw InputError(file, "/family_plan/detail/stage_micro_batch",
                       std::string("whole samples for every block of GPUs (twin execute): ") + error.what());
    }
    if (plan.scenario.model.qk_layernorm && layer.layout.ulysses)
      throw InputError(file, fmt::format("/family_plan/detail/layers/{}/layout", i),
                       "a Megatron layout in a model with QK-norm (a Ulysses layer's lowering emits no QK-norm op "
                       "yet: it would run and price another model)");
    if (plan.scenario.model.attention_sinks && layer.layout.ulysses)
      throw InputError(file, fmt::format("/family_plan/detail/layers/{}/layout", i),
                       "a Megatron layout in a model with attention sinks (twin execute holds a layer's sinks by its "
                       "TP shard of heads, not by a Ulysses group's)");
    if (plan.scenario.framework.tp_comm_overlap && layer.layout.group > 1)
      throw InputError(file, "/scenario/framework/tp_comm_overlap", kNoUserbuffers);
  }
  // Tied embeddings over stages: the table and its copy sum their gradients shard by shard.
  if (layers.pipeline_stages > 1 && !plan.scenario.model.untie_embeddings_and_output_weights &&
      edge_layout(layers.layers.front().layout) != edge_layout(layers.layers.back().layout))
    throw InputError(file, fmt::format("/family_plan/detail/layers/{}", layers.layers.size() - 1),
                     fmt::format("a layout whose output layer is sharded as the embedding beside the first layer "
                                 "(tp{}): with tied embeddings the output layer's copy of the table is summed with "
                                 "the table shard by shard",
                                 edge_layout(layers.layers.front().layout).group));
}

// An asymmetric plan: every stage fits its own GPUs (each GPU then runs its stage as a uniform pipeline of the
// stage's TP size, rank_parts). Reading the plan (parse_pipelines) has refused tied embeddings over stages already.
void check_asymmetric(const Plan& plan, const AsymmetricPlanDetail& detail, const std::string& file) {
  MemoryEstimate memory;
  const std::string oom = asymmetric_out_of_memory_reason(plan.scenario, detail.shared, detail.pipelines, memory);
  if (!oom.empty())
    throw InputError(file, "/family_plan/detail", "a plan that fits; the simulator says it does not: " + oom);
  if (plan.scenario.framework.tp_comm_overlap && detail.shared.sequence_parallel)
    throw InputError(file, "/scenario/framework/tp_comm_overlap", kNoUserbuffers);
}

}  // namespace

void check_family_rules(const Plan& plan, const PlanGraphs& lowered, const std::string& file) {
  if (lowered.per_layer) check_per_layer(plan, *lowered.per_layer, file);
  if (lowered.asymmetric) check_asymmetric(plan, *lowered.asymmetric, file);
}

}  // namespace twin
