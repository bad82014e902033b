// FP8 linears per GPU: their weights, the bytes of casts, the bytes of copies and scaling state.
#include "strategies/fp8_linears.hpp"

#include <cmath>

namespace twin {

GemmInputs fp8_gemm_inputs(Fp8Recipe recipe, GemmPass pass) {
  switch (recipe) {
    case Fp8Recipe::delayed:
    case Fp8Recipe::tensorwise: return GemmInputs::fp8_per_tensor;
    case Fp8Recipe::blockwise:
      return pass == GemmPass::weight_gradient ? GemmInputs::fp8_blockwise_1d : GemmInputs::fp8_blockwise;
    case Fp8Recipe::mxfp8: return GemmInputs::mxfp8;
  }
  return GemmInputs::fp8_per_tensor;
}

namespace {

// The FP8 weights of one layer per GPU: the TP-split linear weights and this rank's experts.
RankParameters layer_fp8_weights(const ModelConfig& model, int layer, int tp, int ep, int etp) {
  const LayerParameterGroups g = layer_parameter_groups(model, layer);
  RankParameters p;
  p.dense = (g.attention_weights + g.mlp_weights) / tp;
  if (g.experts > 0) p.expert = g.per_expert / etp * (g.experts / ep);  // biases included: a few per mille
  return p;
}

// Calls visit(layer) for every layer pipeline stage `stage` holds (MTP depths' included).
template <class Visit>
void for_stage_layers(const ModelConfig& m, const Strategy& s, int stage, Visit&& visit) {
  for (int chunk = 0; chunk < chunks_per_stage(s); ++chunk)
    for (int layer : chunk_layers(m, s, stage, chunk)) visit(layer);
}

}  // namespace

RankParameters fp8_weights_per_rank(const Scenario& scenario, const Strategy& s, int stage) {
  RankParameters total;
  if (!scenario.training.fp8) return total;
  const ModelConfig& m = scenario.model;
  for_stage_layers(m, s, stage, [&](int layer) {
    if (layer_runs_fp8(*scenario.training.fp8, layer, m.num_layers))
      total += layer_fp8_weights(m, layer, s.tensor_model_parallel_size, s.expert_model_parallel_size,
                                 s.expert_tensor_parallel_size);
  });
  return total;
}

int fp8_modules_per_layer(const ModelConfig& model, int layer, int expert_parallel) {
  const int experts = model.is_moe_layer(layer) ? model.moe.num_experts / expert_parallel : 0;
  return 2 + (experts > 0 ? 2 * experts : 2);
}

std::int64_t fp8_amax_reduction_bytes(const Scenario& scenario, const Strategy& s, int stage, int chunk,
                                      bool forward) {
  if (!scenario.training.fp8 || scenario.training.fp8->recipe != Fp8Recipe::delayed) return 0;
  if (s.tensor_model_parallel_size * s.context_parallel_size * s.data_parallel_size == 1) return 0;
  const ModelConfig& m = scenario.model;
  std::int64_t modules = 0;
  for (int layer : chunk_layers(m, s, stage, chunk))
    if (layer_runs_fp8(*scenario.training.fp8, layer, m.num_layers))
      modules += fp8_modules_per_layer(m, layer, s.expert_model_parallel_size);
  return modules * (forward ? 3 : 2) * 4;
}

std::int64_t fp8_cast_bytes(Fp8Recipe recipe, std::int64_t elements, bool columnwise, double source_bytes) {
  const double n = static_cast<double>(elements);
  const double copy = n + fp8_scale_bytes(recipe, n);
  const double amax_pass = recipe == Fp8Recipe::tensorwise ? source_bytes * n : 0;
  return std::llround(source_bytes * n + amax_pass + copy * (columnwise ? 2 : 1));
}

std::int64_t fp8_transpose_bytes(std::int64_t elements) { return 2 * elements; }

double fp8_state_bytes(const Scenario& scenario, const Strategy& s, int stage) {
  if (!scenario.training.fp8) return 0;
  const Fp8Config& fp8 = *scenario.training.fp8;
  const ModelConfig& m = scenario.model;
  const double weights = static_cast<double>(fp8_weights_per_rank(scenario, s, stage).total());
  const double copies = 2 * (weights + fp8_scale_bytes(fp8.recipe, weights));
  const double replaced = fp8.param_gather ? 2 * weights : 0;  // the bf16 weight the FP8 one replaces
  int modules = 0;
  for_stage_layers(m, s, stage, [&](int layer) {
    if (layer_runs_fp8(fp8, layer, m.num_layers)) modules += fp8_modules_per_layer(m, layer, s.expert_model_parallel_size);
  });
  const int history = fp8.recipe == Fp8Recipe::delayed ? fp8.amax_history_len : 1;
  const double scaling_state = modules * 3.0 * (4.0 * history + 8);  // amax history, scale and its inverse
  return copies - replaced + scaling_state;
}

}  // namespace twin
