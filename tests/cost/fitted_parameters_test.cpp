// The built-in profile's fitted parameters: the profile's in-situ priors are the table's values (the H200 at
// the Hopper value scaled by its measured ratio), and setting a value, or none, reaches exactly the GPUs a
// parameter applies to.
#include <gtest/gtest.h>

#include "cost/fitted_parameters.hpp"

namespace twin {
namespace {

const FittedParameter& parameter(const std::string& name) {
  for (const FittedParameter& p : builtin_fitted_parameters())
    if (p.name == name) return p;
  throw std::logic_error("no parameter " + name);
}

const GpuKernelProfile& kernels(const Profile& profile, const std::string& gpu) {
  for (const GpuKernelProfile& k : profile.gpus)
    if (k.gpu == gpu) return k;
  throw std::logic_error("no kernel profile of " + gpu);
}

TEST(FittedParameters, TheBuiltinProfileTakesItsInTrainingFactorsFromTheTable) {
  const Profile& builtin = builtin_profile();
  const FittedParameter &hopper = parameter("hopper_in_training"), &ampere = parameter("ampere_in_training");
  EXPECT_EQ(kernels(builtin, "H100-SXM-80GB").in_situ_prior.gemm, hopper.value);
  EXPECT_EQ(kernels(builtin, "H200-141GB").in_situ_prior.attention,
            in_training_factor(hopper, hopper.value, "H200-141GB"));
  EXPECT_LT(kernels(builtin, "H200-141GB").in_situ_prior.gemm, hopper.value);  // its GEMMs slowed less in training
  for (const char* gpu : {"A100-SXM-40GB", "A100-SXM-80GB", "A800-80GB"})
    EXPECT_EQ(kernels(builtin, gpu).in_situ_prior.memory_bound, ampere.value) << gpu;
  EXPECT_EQ(kernels(builtin, "RTX-4090").in_situ_prior.gemm, 1.0);
  for (const FittedParameter& p : builtin_fitted_parameters()) {
    EXPECT_FALSE(p.meaning.empty()) << p.name;
    EXPECT_FALSE(p.fit_groups.empty()) << p.name;
  }
}

TEST(FittedParameters, AValueReachesTheGpusTheParameterAppliesToAndNoneMeansBenchmarkPrices) {
  const FittedParameter& hopper = parameter("hopper_in_training");
  const Profile refitted = with_fitted_value(builtin_profile(), hopper, 1.5);
  EXPECT_EQ(kernels(refitted, "H100-SXM-80GB").in_situ_prior.gemm, 1.5);
  EXPECT_NEAR(kernels(refitted, "H200-141GB").in_situ_prior.gemm, 1.5 * 1.1155 / 1.1266, 1e-12);
  EXPECT_EQ(kernels(refitted, "A100-SXM-80GB").in_situ_prior.gemm, parameter("ampere_in_training").value);
  const Profile benchmark = with_fitted_value(builtin_profile(), hopper, std::nullopt);
  EXPECT_EQ(kernels(benchmark, "H100-SXM-80GB").in_situ_prior.attention, 1.0);
  EXPECT_EQ(kernels(benchmark, "H200-141GB").in_situ_prior.gemm, 1.0);
  EXPECT_TRUE(applies_to(hopper, "H200-141GB"));
  EXPECT_FALSE(applies_to(hopper, "A100-SXM-80GB"));
  EXPECT_TRUE(applies_to({"one_gpu", "A800-80GB", "", {}, 1, {}}, "A800-80GB"));
}

}  // namespace
}  // namespace twin
