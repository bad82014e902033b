// A flash kernel runs its head dim rounded up as FlashAttention-2 rounds it (a multiple of 32 up to 192, else 256):
// head dim 80 is priced as 96's work, the head dims calibration measures as they are.
#include <gtest/gtest.h>

#include "cost/attention_waves.hpp"

namespace twin {
namespace {

TEST(AttentionHeadDim, RoundsUpAsTheKernelsRun) {
  EXPECT_EQ(kernel_head_dim(64), 64);
  EXPECT_EQ(kernel_head_dim(80), 96);
  EXPECT_EQ(kernel_head_dim(96), 96);
  EXPECT_EQ(kernel_head_dim(112), 128);
  EXPECT_EQ(kernel_head_dim(192), 192);
  EXPECT_EQ(kernel_head_dim(224), 256);
  EXPECT_EQ(kernel_head_dim(256), 256);
}

TEST(AttentionHeadDim, TheWaveStepsCountTheRoundedHeadDim) {
  AttentionShape a{8, 32, 32, 2048, 2048, 80, true, true};
  const double eighty = attention_wave_steps(a, false, 132);
  a.head_dim = 96;
  EXPECT_DOUBLE_EQ(eighty, attention_wave_steps(a, false, 132));
}

}  // namespace
}  // namespace twin
