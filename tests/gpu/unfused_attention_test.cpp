// Unfused attention as Megatron-LM's kernels (gpu/unfused_attention.hpp): forward and backward against the float64
// reference of the full score matrix (tests/gpu/attention_reference.hpp), MHA and GQA, one and two sequences, a
// fused-QKV layout, with dropout (the mask read back from the kept scores); the kept probabilities against the
// reference's softmax; the same inputs give the fused cuDNN attention's output; and what it refuses.
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "gpu/attention.hpp"
#include "gpu/unfused_attention.hpp"
#include "tests/gpu/attention_reference.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using B = k::bf16;

struct UnfusedCase {
  AttentionCase shape;
  double dropout;
};

// The inputs of one case: a [tokens, q | k | v] buffer (fused) or three, and dO.
struct Inputs {
  gpu::DeviceBuffer fused, qb, kb, vb, dout;
  const B *q = nullptr, *k = nullptr, *v = nullptr;
  std::int64_t q_stride = 0, kv_stride = 0;
};

Inputs make_inputs(const AttentionCase& c) {
  Inputs in;
  const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  in.q_stride = c.fused_qkv ? q_width + 2 * kv_width : q_width;
  in.kv_stride = c.fused_qkv ? q_width + 2 * kv_width : kv_width;
  if (c.fused_qkv) {
    in.fused = random_bf16(tokens * in.q_stride, 2.0);
    in.q = bf(in.fused), in.k = in.q + q_width, in.v = in.k + kv_width;
  } else {
    in.qb = random_bf16(tokens * q_width, 2.0), in.kb = random_bf16(tokens * kv_width, 2.0);
    in.vb = random_bf16(tokens * kv_width);
    in.q = bf(in.qb), in.k = bf(in.kb), in.v = bf(in.vb);
  }
  in.dout = random_bf16(tokens * q_width);
  return in;
}

class UnfusedAttention : public ::testing::TestWithParam<UnfusedCase> {};

TEST_P(UnfusedAttention, ForwardAndBackwardMatchFloat64) {
  REQUIRE_GPU();
  const auto [c, p] = GetParam();
  const Inputs in = make_inputs(c);
  const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, in.q_stride, in.kv_stride, true};
  const bool drop = p > 0;
  const gpu::AttentionDropout dropout{static_cast<float>(p), 11};
  auto kept = poisoned(gpu::unfused_scores_bytes(dims, drop));
  const gpu::UnfusedScores scores = gpu::unfused_scores_in(kept.data(), dims, drop);
  auto o = poisoned(tokens * q_width * 2);
  auto dqb = poisoned(tokens * in.q_stride * 2), dkb = poisoned(tokens * in.kv_stride * 2);
  auto dvb = poisoned(tokens * in.kv_stride * 2);
  gpu::UnfusedAttention attention;
  attention.forward(in.q, in.k, in.v, bf(o), scores, dims, dropout, nullptr);
  attention.backward(in.q, in.k, in.v, bf(in.dout), scores, bf(dqb), bf(dkb), bf(dvb), dims, dropout, nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());

  const std::int64_t score_count = c.batch * c.heads * c.seq * c.seq;
  DropoutMask mask{std::vector<std::uint8_t>(score_count), p};
  if (drop) TWIN_CUDA_CHECK(cudaMemcpy(mask.keep.data(), scores.mask, score_count, cudaMemcpyDeviceToHost));
  const auto hq = bf16_to_host(in.q, (tokens - 1) * in.q_stride + q_width);
  const auto hk = bf16_to_host(in.k, (tokens - 1) * in.kv_stride + kv_width);
  const auto hv = bf16_to_host(in.v, (tokens - 1) * in.kv_stride + kv_width);
  const AttentionReference r = attention_reference(c, hq, hk, hv, bf16_to_host(in.dout.data(), tokens * q_width),
                                                   in.q_stride, in.kv_stride, 0, drop ? &mask : nullptr);
  // The kept probabilities: exp(score - lse) below the diagonal, 0 above.
  std::vector<double> probs(score_count, 0.0);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (std::int64_t i = 0; i < c.seq; ++i)
        for (std::int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int d = 0; d < c.head_dim; ++d)
            s += hq[(b * c.seq + i) * in.q_stride + h * c.head_dim + d] *
                 hk[(b * c.seq + j) * in.kv_stride + (h / (c.heads / c.kv_heads)) * c.head_dim + d];
          probs[((b * c.heads + h) * c.seq + i) * c.seq + j] =
              std::exp(s / std::sqrt(double(c.head_dim)) - r.lse[(b * c.heads + h) * c.seq + i]);
        }
  const auto rows = [&](const gpu::DeviceBuffer& buffer, std::int64_t width, std::int64_t stride) {
    return compact_rows(bf16_to_host(buffer.data(), (tokens - 1) * stride + width), tokens, width, stride);
  };
  const double errors[5] = {relative_error(bf16_to_host(o.data(), tokens * q_width), r.o),
                            relative_error(bf16_to_host(scores.probs, score_count), probs),
                            relative_error(rows(dqb, q_width, in.q_stride), r.dq),
                            relative_error(rows(dkb, kv_width, in.kv_stride), r.dk),
                            relative_error(rows(dvb, kv_width, in.kv_stride), r.dv)};
  char name[120];
  std::snprintf(name, sizeof name, "b=%lld s=%lld h=%d kvh=%d d=%d%s dropout=%.2f", (long long)c.batch,
                (long long)c.seq, c.heads, c.kv_heads, c.head_dim, c.fused_qkv ? " fused" : "", p);
  std::printf("[kernel-error] unfused attention %s: O %.2e P %.2e dQ %.2e dK %.2e dV %.2e\n", name, errors[0],
              errors[1], errors[2], errors[3], errors[4]);
  for (double e : errors) EXPECT_LT(e, kBf16Tolerance) << name;
  if (drop) {  // the mask drops about p of the kept scores
    std::int64_t dropped = 0, counted = 0;
    for (std::int64_t i = 0; i < score_count; ++i) dropped += mask.keep[i] == 0, ++counted;
    EXPECT_NEAR(static_cast<double>(dropped) / counted, p, 0.01) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, UnfusedAttention,
                         ::testing::Values(UnfusedCase{{1, 256, 4, 4, 64, true, false}, 0},
                                           UnfusedCase{{2, 256, 4, 4, 128, true, true}, 0},
                                           UnfusedCase{{2, 128, 8, 2, 128, true, true}, 0},
                                           UnfusedCase{{1, 512, 4, 1, 64, true, false}, 0},
                                           UnfusedCase{{2, 136, 6, 6, 64, true, true}, 0.1},
                                           UnfusedCase{{1, 256, 8, 2, 128, true, false}, 0.25}));

// The same inputs through cuDNN's fused attention give the same output (the two implementations of one function).
TEST(UnfusedAttentionAgainstFused, OutputsAgree) {
  REQUIRE_GPU();
  const AttentionCase c{2, 512, 8, 2, 128, true, true};
  const Inputs in = make_inputs(c);
  const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim;
  const k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, in.q_stride, in.kv_stride, true};
  auto kept = poisoned(gpu::unfused_scores_bytes(dims, false));
  auto unfused_o = poisoned(tokens * q_width * 2), fused_o = poisoned(tokens * q_width * 2);
  auto lse = poisoned(c.batch * c.heads * c.seq * 4);
  gpu::UnfusedAttention unfused;
  unfused.forward(in.q, in.k, in.v, bf(unfused_o), gpu::unfused_scores_in(kept.data(), dims, false), dims, {}, nullptr);
  gpu::Attention fused(AttentionImplementation::cudnn);
  fused.forward(in.q, in.k, in.v, bf(fused_o), f32(lse), dims, nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  const double error = relative_error(bf16_to_host(unfused_o.data(), tokens * q_width),
                                      bf16_to_host(fused_o.data(), tokens * q_width));
  std::printf("[kernel-error] unfused against cuDNN fused attention: O %.2e\n", error);
  EXPECT_LT(error, kBf16Tolerance);
}

// A window, a cap, a sequence no multiple of 8, or no causal mask: refused, not run as something else.
TEST(UnfusedAttentionRefusals, ShapesItDoesNotRun) {
  REQUIRE_GPU();
  gpu::UnfusedAttention attention;
  const k::AttentionDims plain{1, 64, 2, 2, 64, 0, 0, true};
  auto windowed = plain, capped = plain, ragged = plain, full = plain;
  windowed.window = 16, capped.softcap = 30, ragged.seq = 60, full.causal = false;
  for (const k::AttentionDims& dims : {windowed, capped, ragged, full})
    EXPECT_THROW(attention.forward(nullptr, nullptr, nullptr, nullptr, {}, dims, {}, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace twin::test
