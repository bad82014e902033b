// twin calibrate starts from the built-in profile's GPU entry without what the built-in profile fitted for
// clusters: no in-training prior, no measured shapes, no collective corrections (docs/PROFILES.md: "twin
// calibrate writes none"), and no clock a step holds but what the calibration measures.
#include <gtest/gtest.h>

#include "calibrate/calibration_base.hpp"

namespace twin {
namespace {

TEST(CalibrationBase, KeepsNoInTrainingPriorNorMeasurements) {
  for (const char* name : {"H100-SXM-80GB", "H200-141GB", "A100-SXM-80GB"}) {
    const GpuSpec gpu = *gpu_preset(name);
    ASSERT_NE(builtin_profile().kernels_for(gpu).in_situ_prior, InSituPrior{}) << name << ": the test needs a prior";
    const GpuKernelProfile base = calibration_base(gpu, name);
    EXPECT_EQ(base.gpu, name);
    EXPECT_EQ(base.in_situ_prior, InSituPrior{}) << name;
    EXPECT_TRUE(base.measured.empty()) << name;
    EXPECT_TRUE(base.measured_gemms.empty() && base.measured_kernels.empty()) << name;
    EXPECT_TRUE(base.corrections.empty()) << name;
    EXPECT_EQ(base.sustained_sm_clock_MHz, 0) << name;  // the built-in's H200 and H100 state one
    EXPECT_TRUE(base.sustained_clock.points.empty() && base.sustained_clock_fp8.points.empty()) << name;
    EXPECT_FALSE(base.power_model.present()) << name;
  }
  EXPECT_GT(builtin_profile().kernels_for(*gpu_preset("H200-141GB")).sustained_sm_clock_MHz, 0)
      << "the test needs a built-in clock to leave out";
}

}  // namespace
}  // namespace twin
