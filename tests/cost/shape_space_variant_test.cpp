// An op is compared with the measured shapes by the fields its own kind's key names: the lowering stamps the model's
// activation and attention backend on every op, so a GeLU or unfused-attention model's norms, losses and attention
// must still find the shapes a calibration measured (until 2026-11-30 they fell back to the curves).
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "cost/shape_space.hpp"

namespace twin {
namespace {

TEST(ShapeSpaceVariant, ANormOfAGeluModelIsComparableWithTheMeasuredNorms) {
  const auto measured = op_from_kernel_key("norm_forward:rows=4096,cols=4096,ln=1");
  ASSERT_TRUE(measured.has_value());
  Op norm;
  norm.kind = OpKind::norm_forward;
  norm.rows = 8192;
  norm.cols = 2560;
  norm.normalization = Normalization::layernorm;
  norm.activation = Activation::gelu;  // the model's, as the lowering stamps it
  norm.attention.flash = false;        // an unfused-attention model's
  EXPECT_TRUE(squared_octave_distance(*measured, norm).has_value());
  norm.normalization = Normalization::rmsnorm;  // the norm's own variant still tells them apart
  EXPECT_FALSE(squared_octave_distance(*measured, norm).has_value());
}

TEST(ShapeSpaceVariant, AnActivationStillKeysItsFormAndAttentionItsBackend) {
  const auto gated = op_from_kernel_key("activation_forward:rows=4096,cols=11008,gated=1");
  const auto plain = op_from_kernel_key("activation_forward:rows=4096,cols=16384,gated=0");
  ASSERT_TRUE(gated && plain);
  EXPECT_FALSE(squared_octave_distance(*gated, *plain).has_value());
  const auto flash = op_from_kernel_key("attention_forward:b=1,h=32,kvh=8,sq=2048,skv=2048,d=128,causal=1,flash=1");
  ASSERT_TRUE(flash.has_value());
  Op unfused = *flash;
  unfused.attention.flash = false;
  EXPECT_FALSE(squared_octave_distance(*flash, unfused).has_value());
  Op gelu_model = *flash;
  gelu_model.activation = Activation::gelu;
  EXPECT_TRUE(squared_octave_distance(*flash, gelu_model).has_value());
  Op fused = *flash;  // Megatron's "fused" backend: calibration's attention, cuDNN's, keyed as flash, prices it
  fused.attention.cudnn = true;
  EXPECT_TRUE(squared_octave_distance(*flash, fused).has_value());
}

}  // namespace
}  // namespace twin
