// Reading strategy.recompute_modules. Megatron refuses mla_up_proj without MLA (transformer_config.py:1969) and moe
// beside the overlapped EP schedule (:3030); twin also refuses a module the model does not have (an MoE module in a
// dense model, the shared experts without any, mlp where every layer is MoE: Megatron recomputes the dense MLP
// only, transformer_layer.py:537), since it would state a recompute that repeats nothing.
#include "core/scenario_recompute.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace twin {

std::vector<RecomputeModule> parse_recompute_modules(const JsonReader& r, Recompute granularity) {
  if (granularity != Recompute::selective)
    r.fail_plain("recompute_modules needs recompute \"selective\" (Megatron's --recompute-modules applies under "
                 "--recompute-granularity selective only; \"full\" repeats the whole layer)");
  std::vector<RecomputeModule> modules;
  for (const JsonReader& element : r.non_empty_elements()) {
    const RecomputeModule m = *recompute_module_from_string(element.one_of(recompute_module_names(), "recompute module"));
    if (std::ranges::find(modules, m) != modules.end()) element.fail("expected each module once");
    modules.push_back(m);
  }
  return modules;
}

namespace {
bool has_dense_layer(const ModelConfig& m) {
  for (int layer = 0; layer < m.num_layers; ++layer)
    if (!m.is_moe_layer(layer)) return true;
  return false;
}
}  // namespace

void check_recompute_modules(const JsonReader& modules, const std::vector<RecomputeModule>& stated,
                             const Scenario& scenario) {
  const ModelConfig& m = scenario.model;
  const std::vector<JsonReader> elements = modules.elements();
  for (std::size_t i = 0; i < stated.size(); ++i) {
    const JsonReader& at = elements[i];
    switch (stated[i]) {
      case RecomputeModule::core_attn:
      case RecomputeModule::layernorm: break;
      case RecomputeModule::mla_up_proj:
        if (!m.mla.enabled()) at.fail("a model with multi-latent attention (model.mla) for mla_up_proj");
        break;
      case RecomputeModule::mlp:
        if (!has_dense_layer(m)) at.fail("a model with a dense MLP layer for mlp (Megatron recomputes no MoE layer's)");
        break;
      case RecomputeModule::moe_act:
        if (!m.is_moe()) at.fail("an MoE model for moe_act");
        break;
      case RecomputeModule::moe:
        if (!m.is_moe()) at.fail("an MoE model for moe");
        if (scenario.framework.overlap_moe_expert_parallel_comm)
          at.fail_plain("moe: not with framework.overlap_moe_expert_parallel_comm (Megatron: \"disable moe in "
                        "recompute_modules when enabling overlap_moe_expert_parallel_comm\")");
        break;
      case RecomputeModule::shared_experts:
        if (m.moe.shared_expert_ffn_hidden_size == 0) at.fail("an MoE model with shared experts for shared_experts");
        break;
    }
  }
}

}  // namespace twin
