// Attention dropout inside fused attention: what drawing the mask adds to a fused attention kernel.
//
// Model: cuDNN's fused kernels (and FlashAttention's) draw one Philox Bernoulli per score element they compute (the
// causal half and its diagonal tiles: core/op.hpp attention_score_fraction) on the SMs' integer pipes, beside the
// tensor-core work; the forward draws the mask, the backward draws it again. The added time is
//     drawn elements x SM cycles per element / (SMs x clock),
// at the clock the profile's attention timings stand at (its reference clock where they were probed, else the
// measurement's 1,980 MHz); the step's clock then scales it with the rest of the attention time.
//
// SM cycles per drawn element, measured on one H200 (132 SMs) at 1,980 MHz, 2026-11-30 05:14 UTC
// (`test_gpu --gtest_filter=AttentionDropoutSpeed.*`, cuDNN 9.19, p 0.1; docs/ACCURACY.md "Attention dropout's
// price"): fitted on b 1, s 4096, 32 heads over 8 groups, head dim 128 (1.039 ps forward, 0.652 backward per drawn
// element); held out on four other shapes, the kernel with dropout priced within -15% / +4.1% forward and -12% /
// +1.5% backward (without this price: -36% to -53% and -11% to -22%). Physical meaning: 0.27 SM cycles, or 17 of an
// SM's 64 integer lanes' operations, per element forward (Philox4x32-10 makes four 32-bit draws in ten rounds of two
// 32-bit multiplies and their mixing); the backward's redraw hides a third of its cost behind its larger products.
// Other GPUs: the same cycles per element over their SM count (a Hopper measurement scaled by the SM count and the
// clock, as Blackwell's presets are; not measured on A100 or B200).
#pragma once
#include "core/cluster.hpp"
#include "core/op.hpp"
#include "cost/profile.hpp"

namespace twin {

inline constexpr double kAttentionDropoutForwardSmCyclesPerElement = 0.2716;
inline constexpr double kAttentionDropoutBackwardSmCyclesPerElement = 0.1704;
inline constexpr double kAttentionDropoutMeasuredClockMHz = 1980;

// Whether an attention op drops its probabilities: unfused with its dropout kernel (AttentionShape::dropout), or
// fused with its own RNG (the op's attention dropout, Op::dropout > 0).
bool drops_attention_probabilities(const Op& op);
// Fused attention that drops its probabilities (the draws priced below).
bool fused_attention_dropout(const Op& op);
// The time drawing the mask adds to a fused attention op at the profile's attention clock, ns; 0 for other ops or a
// GPU without an SM count.
double fused_attention_dropout_ns(const Op& op, const GpuSpec& gpu, const GpuKernelProfile& kernels);

}  // namespace twin
