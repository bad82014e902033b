// The built-in profile's parameters that are fitted to published training runs, as data: one row each (its
// name, the GPUs it prices, its physical meaning, the validation groups it is fitted on by default, its
// value), so that `twin validate --cross-validate` can refit every one of them without the group it predicts,
// and a new fitted parameter is one more row (docs/VALIDATION.md, "Cross-validated: leave one group out").
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/profile.hpp"

namespace twin {

// A GPU the parameter applies to whose in-training factor is the parameter's scaled by a fixed measured ratio:
// how much slower its GEMMs ran inside training steps than their benchmark, over the same for the GPU the
// parameter was fitted on.
struct FollowingGpu {
  std::string gpu;                          // GpuSpec::name
  double gemm_in_training = 1;              // this GPU's
  double reference_gemm_in_training = 1;    // the fitted GPU's
  // The SM clock of the benchmark prices this GPU's ratio was measured against (its calibration's reference
  // clock then): the built-in profile prices this GPU's GEMMs at it, so that the ratio keeps its meaning when
  // the shipped profile it takes its GEMMs from is re-measured at another clock. 0: its profile's own.
  double benchmark_sm_clock_MHz = 0;
};

struct FittedParameter {
  std::string name;                      // "hopper_in_training"
  std::string gpus;                      // a family as gpu_family() gives it ("hopper"), or one GPU's name
  std::string meaning;                   // what it stands for physically, one sentence
  std::vector<std::string> fit_groups;   // the validation groups its built-in value was fitted on
  double value = 1;                      // the built-in profile's value
  std::vector<FollowingGpu> following;   // GPUs of `gpus` that take the value scaled
};

// The built-in profile's fitted parameters, in a fixed order.
const std::vector<FittedParameter>& builtin_fitted_parameters();

bool applies_to(const FittedParameter& parameter, std::string_view gpu_name);
// The SM clock the built-in profile prices `gpu_name`'s GEMMs at where a parameter follows it from a measured
// ratio (FollowingGpu::benchmark_sm_clock_MHz); 0 elsewhere.
double following_benchmark_sm_clock_MHz(std::string_view gpu_name);
// The in-situ prior that `parameter` at `value` gives `gpu_name` (value, scaled for a following GPU).
double in_training_factor(const FittedParameter& parameter, double value, std::string_view gpu_name);
// `profile` with the in-situ prior (GEMMs, attention, memory-bound kernels alike) of every kernel profile
// `parameter` applies to set from `value`; no value: benchmark prices (factor 1 on every such GPU).
Profile with_fitted_value(Profile profile, const FittedParameter& parameter, std::optional<double> value);

}  // namespace twin
