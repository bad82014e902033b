// How an attention op of a variant no measured shape has is priced (cost/attention_waves.hpp): a soft-capped op or
// one with sinks as the kernel without them, through the wave carrier; a windowed op as the kernel without the
// window at its shape, scaled by the steps the window keeps, from measured shapes where the profile has them and from
// the efficiency curve where it has none; the op's own measured variant first.
#include <gtest/gtest.h>

#include "cost/attention_waves.hpp"

namespace twin {
namespace {

Op attention(bool backward, std::int64_t seq, std::int64_t window) {
  Op op;
  op.kind = backward ? OpKind::attention_backward : OpKind::attention_forward;
  AttentionShape& a = op.attention;
  a.batch = 1, a.heads = 64, a.kv_heads = 8, a.seq_q = a.seq_kv = seq, a.head_dim = 64, a.causal = true, a.flash = true;
  a.window = static_cast<std::int32_t>(window);
  return op;
}

double steps(const Op& op) {
  return attention_wave_steps(op.attention, op.kind == OpKind::attention_backward, 132);
}

TEST(AttentionVariants, AWindowedOpRunsTheTilesItKeepsAtTheWholeKernelsPace) {
  const auto curve = [](const Op&) { return 1e6; };
  for (bool backward : {false, true}) {
    const Op whole = attention(backward, 8192, 0), windowed = attention(backward, 8192, 128);
    const std::vector<MeasuredKernelShape> measured{{whole, 1.3e6}};
    const double kept = steps(windowed) / steps(whole);
    EXPECT_GT(kept, 0.1);  // gpt-oss's 128 keys of 8,192: a tenth of the keys, but whole tiles across the band
    EXPECT_LT(kept, 0.2);
    EXPECT_NEAR(predict_attention_time_ns(measured, windowed, 132, curve), 1.3e6 * kept, 1e-6);
    // No measured attention at all: the curve's time of the whole kernel, scaled the same.
    EXPECT_NEAR(predict_attention_time_ns({}, windowed, 132, curve), 1e6 * kept, 1e-6);
    // The window's own measurement wins.
    const std::vector<MeasuredKernelShape> both{{whole, 1.3e6}, {windowed, 2.2e5}};
    EXPECT_DOUBLE_EQ(predict_attention_time_ns(both, windowed, 132, curve), 2.2e5);
  }
}

TEST(AttentionVariants, CappedOrSinksOpsWithoutTheirOwnMeasurementsArePricedAsThePlainKernel) {
  const auto curve = [](const Op&) { return 1e6; };
  const Op plain = attention(false, 8192, 0);
  const std::vector<MeasuredKernelShape> measured{{plain, 1.3e6}};
  Op capped = plain, sinks = plain;
  capped.attention.softcapped = true;
  sinks.attention.sinks = true;
  EXPECT_DOUBLE_EQ(predict_attention_time_ns(measured, capped, 132, curve), 1.3e6);
  EXPECT_DOUBLE_EQ(predict_attention_time_ns(measured, sinks, 132, curve), 1.3e6);
  // Windowed with sinks: the plain whole kernel, scaled by the kept steps.
  Op windowed_sinks = attention(false, 8192, 128);
  windowed_sinks.attention.sinks = true;
  EXPECT_NEAR(predict_attention_time_ns(measured, windowed_sinks, 132, curve),
              1.3e6 * steps(windowed_sinks) / steps(plain), 1e-6);
  // A measured shape with sinks prices the op with sinks.
  const std::vector<MeasuredKernelShape> with_sinks{{plain, 1.3e6}, {sinks, 1.34e6}};
  EXPECT_DOUBLE_EQ(predict_attention_time_ns(with_sinks, sinks, 132, curve), 1.34e6);
}

}  // namespace
}  // namespace twin
