// Multi-latent attention's kernels against float64 references: the heads' expansion and its gradient's reduction
// (gpu/kernels/mla.cu); cuDNN's attention with values narrower than queries and keys (d_qk != d_v, DeepSeek-V3's
// 192 and 128 among them), twin's own kernels refusing it. The whole block: tests/gpu/mla_block_test.cpp.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <tuple>

#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"
#include "tests/gpu/attention_reference.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using Host = std::vector<double>;

// The heads of `s` expanded and their gradients reduced, against float64, the shared key in columns first ..
// first + rope - 1 of k_pe's rows (the other columns must keep their bytes).
void check_expand_and_reduce(const k::MlaHeads& s, std::int64_t first) {
  SCOPED_TRACE(::testing::Message() << "nope " << s.nope << ", rope " << s.rope << ", v " << s.v << ", shared key at " << first);
  const std::int64_t t = s.tokens, kv_width = s.heads * (s.nope + s.v), kw = s.nope + s.rope;
  auto kv = random_bf16(t * kv_width), ckv = random_bf16(t * s.k_pe_row_stride);
  auto key = poisoned(t * s.heads * kw * 2), value = poisoned(t * s.heads * s.v * 2);
  k::mla_expand_kv(bf(kv), bf(ckv) + first, bf(key), bf(value), s, nullptr);
  const Host hkv = bf16_to_host(kv.data(), t * kv_width), hckv = bf16_to_host(ckv.data(), t * s.k_pe_row_stride);
  Host want_k(t * s.heads * kw), want_v(t * s.heads * s.v);
  for (std::int64_t r = 0; r < t * s.heads; ++r) {
    for (int c = 0; c < s.nope; ++c) want_k[r * kw + c] = hkv[r * (s.nope + s.v) + c];
    for (int c = 0; c < s.rope; ++c) want_k[r * kw + s.nope + c] = hckv[(r / s.heads) * s.k_pe_row_stride + first + c];
    for (int c = 0; c < s.v; ++c) want_v[r * s.v + c] = hkv[r * (s.nope + s.v) + s.nope + c];
  }
  EXPECT_EQ(bf16_to_host(key.data(), want_k.size()), want_k) << "keys: copies of the kv rows and the shared key";
  EXPECT_EQ(bf16_to_host(value.data(), want_v.size()), want_v) << "values: copies of the kv rows";

  auto dk = random_bf16(t * s.heads * kw), dv = random_bf16(t * s.heads * s.v);
  auto d_kv = poisoned(t * kv_width * 2), d_ckv = random_bf16(t * s.k_pe_row_stride);
  const Host before = bf16_to_host(d_ckv.data(), t * s.k_pe_row_stride);
  k::mla_reduce_kv_grad(bf(dk), bf(dv), bf(d_kv), bf(d_ckv) + first, s, nullptr);
  const Host hdk = bf16_to_host(dk.data(), t * s.heads * kw), hdv = bf16_to_host(dv.data(), t * s.heads * s.v);
  Host want_dkv(t * kv_width), want_pe(t * s.rope, 0.0), got_pe(t * s.rope), others, got_others;
  for (std::int64_t r = 0; r < t * s.heads; ++r) {
    for (int c = 0; c < s.nope; ++c) want_dkv[r * (s.nope + s.v) + c] = hdk[r * kw + c];
    for (int c = 0; c < s.v; ++c) want_dkv[r * (s.nope + s.v) + s.nope + c] = hdv[r * s.v + c];
    for (int c = 0; c < s.rope; ++c) want_pe[(r / s.heads) * s.rope + c] += hdk[r * kw + s.nope + c];
  }
  const Host after = bf16_to_host(d_ckv.data(), t * s.k_pe_row_stride);
  for (std::int64_t r = 0; r < t; ++r)
    for (std::int64_t c = 0; c < s.k_pe_row_stride; ++c) {
      const std::int64_t at = r * s.k_pe_row_stride + c;
      if (c >= first && c < first + s.rope) {
        got_pe[r * s.rope + c - first] = after[at];
      } else {
        got_others.push_back(after[at]);
        others.push_back(before[at]);
      }
    }
  EXPECT_EQ(bf16_to_host(d_kv.data(), want_dkv.size()), want_dkv) << "d_kv: copies of dK's nope part and dV";
  EXPECT_LT(report("mla shared key grad (sum of heads)", relative_error(got_pe, want_pe)), kBf16Tolerance);
  EXPECT_EQ(got_others, others) << "the latent's columns are not the shared key's gradient";
}

TEST(MlaKernels, ExpandKeysAndValuesAndReduceTheirGradients) {
  REQUIRE_GPU();
  check_expand_and_reduce({67, 4, 32, 16, 24, 40 + 16}, 40);  // widths of 8s: 16 bytes at a time
  check_expand_and_reduce({67, 3, 30, 14, 22, 36 + 14}, 36);  // other widths: an element at a time
  check_expand_and_reduce({67, 4, 32, 16, 24, 40 + 16}, 37);  // the shared key off 16 bytes: an element at a time
}

// cuDNN's SDPA with d_v != d_qk; twin's own kernels refuse it by name.
class MlaAttentionDims : public ::testing::TestWithParam<std::tuple<AttentionCase, AttentionImplementation>> {};

TEST_P(MlaAttentionDims, NarrowValuesMatchFloat64) {
  REQUIRE_GPU();
  const auto [c, backend] = GetParam();
  gpu::Attention attention(backend);
  const std::int64_t t = c.batch * c.seq, qw = c.heads * c.head_dim, vw = c.heads * c.v_head_dim;
  auto q = random_bf16(t * qw, 2.0), key = random_bf16(t * qw, 2.0), v = random_bf16(t * vw), d_o = random_bf16(t * vw);
  auto o = poisoned(t * vw * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
  auto dq = poisoned(t * qw * 2), dk = poisoned(t * qw * 2), dv = poisoned(t * vw * 2);
  k::AttentionDims dims{c.batch, c.seq, c.heads, c.heads, c.head_dim};
  dims.v_head_dim = c.v_head_dim;  // V and dV contiguous, vw wide: the default row stride (calibration's layout)
  attention.forward(bf(q), bf(key), bf(v), bf(o), f32(lse), dims, nullptr);
  attention.backward(bf(q), bf(key), bf(v), bf(o), bf(d_o), f32(lse), bf(dq), bf(dk), bf(dv), dims, nullptr);
  const AttentionReference r =
      attention_reference(c, bf16_to_host(q.data(), t * qw), bf16_to_host(key.data(), t * qw),
                          bf16_to_host(v.data(), t * vw), bf16_to_host(d_o.data(), t * vw), qw, qw, vw);
  const double errors[5] = {relative_error(bf16_to_host(o.data(), t * vw), r.o),
                            relative_error(f32_to_host(lse.data(), r.lse.size()), r.lse),
                            relative_error(bf16_to_host(dq.data(), t * qw), r.dq),
                            relative_error(bf16_to_host(dk.data(), t * qw), r.dk),
                            relative_error(bf16_to_host(dv.data(), t * vw), r.dv)};
  std::printf("[kernel-error] mla attention %s d_qk=%d d_v=%d s=%lld: O %.2e lse %.2e dQ %.2e dK %.2e dV %.2e\n",
              to_string(backend), c.head_dim, c.v_head_dim, (long long)c.seq, errors[0], errors[1], errors[2],
              errors[3], errors[4]);
  for (int i = 0; i < 5; ++i) EXPECT_LT(errors[i], i == 1 ? 1e-5 : kBf16Tolerance) << "output " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MlaAttentionDims,
    ::testing::Combine(::testing::Values(AttentionCase{2, 37, 4, 4, 96, true, false, 64},
                                         AttentionCase{1, 128, 2, 2, 192, true, false, 128}),
                       ::testing::Values(AttentionImplementation::cudnn,
                                         AttentionImplementation::cudnn_deterministic)));

TEST(MlaAttentionKernels, TwinKernelsRefuseNarrowValues) {
  REQUIRE_GPU();
  gpu::Attention attention(AttentionImplementation::kernels);
  k::AttentionDims dims{1, 64, 2, 2, 128};
  dims.v_head_dim = 64;
  auto buffer = poisoned(64 * 2 * 128 * 2 * 4);
  EXPECT_THROW(attention.forward(bf(buffer), bf(buffer), bf(buffer), bf(buffer), f32(buffer), dims, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace twin::test
