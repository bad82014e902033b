// twin calibrate starts from the built-in profile's GPU entry without what the built-in profile fitted for
// clusters: no in-training prior, no measured shapes, no collective corrections (docs/PROFILES.md: "twin
// calibrate writes none").
#include <gtest/gtest.h>

#include "calibrate/calibration_base.hpp"

namespace twin {
namespace {

TEST(CalibrationBase, KeepsNoInTrainingPriorNorMeasurements) {
  for (const char* name : {"H100-SXM-80GB", "H200-141GB", "A100-SXM-80GB"}) {
    const GpuSpec& gpu = *gpu_preset(name);
    ASSERT_NE(builtin_profile().kernels_for(gpu).in_situ_prior, InSituPrior{}) << name << ": the test needs a prior";
    const GpuKernelProfile base = calibration_base(gpu, name);
    EXPECT_EQ(base.gpu, name);
    EXPECT_EQ(base.in_situ_prior, InSituPrior{}) << name;
    EXPECT_TRUE(base.measured.empty()) << name;
    EXPECT_TRUE(base.measured_gemms.empty() && base.measured_kernels.empty()) << name;
    EXPECT_TRUE(base.corrections.empty()) << name;
  }
}

}  // namespace
}  // namespace twin
