// calibrate/sustained_clock_curve.hpp: each GPU's readings to the profile's curve.
#include <gtest/gtest.h>

#include <stdexcept>

#include "calibrate/sustained_clock_curve.hpp"

namespace twin {
namespace {

TEST(SustainedClockCurve, MediansOverTheGpusInAscendingDuty) {
  // Three GPUs, asked for duties 1.0 then 0.5 (the calibration's order: hottest first).
  const std::vector<std::vector<SustainedClockReading>> per_gpu = {
      {{0.999, 1460, 0, 600, 1400}, {0.52, 1560, 1600, 650, 1530}},
      {{0.998, 1440, 0, 590, 1390}, {0.50, 1540, 1590, 640, 1520}},
      {{1.000, 1500, 0, 610, 1410}, {0.49, 1580, 1610, 660, 1550}}};
  const SustainedClockCurve curve = sustained_clock_curve(per_gpu);
  ASSERT_EQ(curve.points.size(), 2u);
  EXPECT_DOUBLE_EQ(curve.points[0].gemm_duty, 0.50);
  EXPECT_DOUBLE_EQ(curve.points[0].sm_clock_MHz, 1560);
  EXPECT_EQ(curve.points[0].gpu_sm_clock_MHz, (std::vector<double>{1560, 1540, 1580}));
  EXPECT_DOUBLE_EQ(curve.points[0].gemm_tflops, 650);
  EXPECT_DOUBLE_EQ(curve.points[1].gemm_duty, 0.999);
  EXPECT_DOUBLE_EQ(curve.points[1].sm_clock_MHz, 1460);
  EXPECT_DOUBLE_EQ(curve.points[0].gemm_clock_MHz, 1530);  // the median GPU's, as the probe's
  EXPECT_DOUBLE_EQ(curve.points[1].gemm_clock_MHz, 1400);
  EXPECT_EQ(describe_sustained_clock(curve).front(),
            "GEMM duty 0.50: 1560 MHz (1540-1580 over 3 GPUs), GEMM 650 TFLOP/s, 1530 MHz by the GEMMs' cycles");
  EXPECT_EQ(curve.points[0].nvml_sm_clock_MHz, 0);  // no NVML reading: none recorded
}

TEST(SustainedClockCurve, NvmlsClockIsTheMedianOverTheGpus) {
  std::vector<std::vector<SustainedClockReading>> per_gpu = {{{0.5, 1560, 1600, 650, 1530}},
                                                             {{0.5, 1540, 1590, 640, 1520}},
                                                             {{0.5, 1580, 1610, 660, 1550}}};
  per_gpu[0][0].nvml_sm_clock_MHz = 1500;
  per_gpu[1][0].nvml_sm_clock_MHz = 1470;
  per_gpu[2][0].nvml_sm_clock_MHz = 1530;
  const SustainedClockCurve curve = sustained_clock_curve(per_gpu);
  EXPECT_DOUBLE_EQ(curve.points[0].nvml_sm_clock_MHz, 1500);
  EXPECT_EQ(describe_sustained_clock(curve).front(), "GEMM duty 0.50: 1560 MHz (1540-1580 over 3 GPUs), GEMM 650 "
                                                      "TFLOP/s, 1530 MHz by the GEMMs' cycles, 1500 MHz by NVML");
}

TEST(SustainedClockCurve, ADutyNotAboveThePreviousIsDroppedAndMismatchesAreRefused) {
  const SustainedClockCurve curve = sustained_clock_curve({{{0.6, 1500, 0, 1}, {0.6, 1550, 0, 1}, {0.3, 1600, 0, 1}}});
  ASSERT_EQ(curve.points.size(), 2u);
  EXPECT_DOUBLE_EQ(curve.points[1].sm_clock_MHz, 1500);  // the first of the two at 0.6
  EXPECT_THROW(sustained_clock_curve({}), std::invalid_argument);
  EXPECT_THROW(sustained_clock_curve({{{0.6, 1500, 0, 1}}, {}}), std::invalid_argument);
}

}  // namespace
}  // namespace twin
