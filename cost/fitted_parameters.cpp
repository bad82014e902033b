// The two in-training factors of the built-in profile, with the command and the runs they were fitted on.
#include "cost/fitted_parameters.hpp"

#include <algorithm>

namespace twin {

namespace {

// Hopper: fitted on the megatron-readme-h100-2024 group (9 Megatron-Core runs, 48 to 6,144 H100s) with
// `twin validate tests/validation/published.json --group megatron-readme-h100-2024 --fit-prior H100-SXM-80GB`
// (2026-11-25 07:12 UTC, on the h100-x1 and h200-x1 calibrations of 06:59 and 06:43 UTC). GEMMs alone ran
// 1.1266x their benchmark price in twin execute's own training steps on one H100 and 1.1155x on one H200
// (docs/ACCURACY.md, the studies of 2026-11-25 06:43-07:02 UTC on those calibrations); the H200 takes the
// H100's factor scaled by that ratio.
constexpr double kHopperInTraining = 1.3727;
constexpr double kH200GemmInTraining = 1.1155, kH100GemmInTraining = 1.1266;

// Ampere: fitted on the narayanan2021-table1 group (10 Megatron-LM runs, 32 to 3,072 A100s) with
// `twin validate tests/validation/published.json --group narayanan2021-table1 --fit-prior ampere` (2026-11-24).
constexpr double kAmpereInTraining = 1.1672;

// What both factors stand for (docs/VALIDATION.md, "What was fitted").
constexpr const char* kInTrainingMeaning =
    "how much longer every kernel runs inside a training step than its benchmark price: the lower clocks of "
    "GPUs held at their power limit, and what no op of the graph holds (launch gaps, host synchronisation, "
    "framework overheads)";

}  // namespace

const std::vector<FittedParameter>& builtin_fitted_parameters() {
  static const std::vector<FittedParameter> parameters = {
      {"ampere_in_training", "ampere", kInTrainingMeaning, {"narayanan2021-table1"}, kAmpereInTraining, {}},
      {"hopper_in_training", "hopper", kInTrainingMeaning, {"megatron-readme-h100-2024"}, kHopperInTraining,
       {{"H200-141GB", kH200GemmInTraining, kH100GemmInTraining}}},
  };
  return parameters;
}

bool applies_to(const FittedParameter& parameter, std::string_view gpu_name) {
  return gpu_name == parameter.gpus || gpu_family(gpu_name) == parameter.gpus;
}

double in_training_factor(const FittedParameter& parameter, double value, std::string_view gpu_name) {
  const auto follower = std::find_if(parameter.following.begin(), parameter.following.end(),
                                     [&](const FollowingGpu& f) { return f.gpu == gpu_name; });
  return follower == parameter.following.end()
             ? value
             : value * follower->gemm_in_training / follower->reference_gemm_in_training;
}

Profile with_fitted_value(Profile profile, const FittedParameter& parameter, std::optional<double> value) {
  for (GpuKernelProfile& kernels : profile.gpus) {
    if (!applies_to(parameter, kernels.gpu)) continue;
    const double factor = value ? in_training_factor(parameter, *value, kernels.gpu) : 1.0;
    kernels.in_situ_prior = {factor, factor, factor};
  }
  return profile;
}

}  // namespace twin
