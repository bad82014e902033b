// training.fp8 against the cluster, the model and the plan families.
#include "core/scenario_fp8.hpp"

#include <fmt/format.h>

namespace twin {

// FP8 needs FP8 tensor cores on every GPU of the cluster, MXFP8 Blackwell's; the first/last BF16 layers fit the
// model; the plan families price 16-bit linears only.
void check_fp8_scenario(const Scenario& s, const JsonReader& root) {
  const JsonReader nodes = root.required("cluster").required("nodes");
  const auto items = nodes.elements();
  for (std::size_t i = 0; i < s.cluster.node_groups.size(); ++i) {
    const GpuSpec& gpu = s.cluster.node_groups[i].gpu;
    if (!(gpu.peak_fp8_tflops > 0))
      items[i].required("gpu").fail_plain(fmt::format(
          "GPU '{}' has no FP8 tensor cores (no peak_fp8_tflops), which training.fp8 needs", gpu.name));
    if (s.training.fp8->recipe == Fp8Recipe::mxfp8 && !gpu.mxfp8)
      items[i].required("gpu").fail_plain(fmt::format(
          "GPU '{}' does not take MXFP8 (Blackwell's tensor cores do), which training.fp8.recipe \"mxfp8\" needs",
          gpu.name));
  }
  const JsonReader fp8_at = root.required("training").required("fp8");
  if (s.plans_families())
    fp8_at.fail_plain("expected no fp8 with per-layer, hot-switching or asymmetric plans (their lowering and "
                      "memory model price 16-bit linears only)");
  const Fp8Config& fp8 = *s.training.fp8;
  if (fp8.first_last_layers_bf16 && fp8.num_layers_at_start_in_bf16 + fp8.num_layers_at_end_in_bf16 > s.model.num_layers)
    fp8_at.fail_plain(fmt::format(
        "expected at most num_layers {} layers kept in BF16, got {} + {}", s.model.num_layers,
        fp8.num_layers_at_start_in_bf16, fp8.num_layers_at_end_in_bf16));
}

}  // namespace twin
