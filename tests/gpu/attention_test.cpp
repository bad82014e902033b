// Attention forward and backward of each implementation (cuDNN's fused flash attention, its
// deterministic backward, twin's own kernels) against a float64 CPU reference that builds the full score
// matrix: causal and not, GQA, head_dim 64 and 128, odd sequence lengths, a fused-QKV layout, sliding windows (shorter
// than the sequence, not a multiple of any tile, of one key, and of at least the sequence), soft-capped scores (head
// dim 256 too on cuDNN, the reference's gradient against central differences); the deterministic ones
// give the same bits twice; a window of the whole sequence gives the causal bits; and the throughput of each at one
// large shape, printed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"
#include "tests/gpu/attention_reference.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using B = k::bf16;

using twin::AttentionImplementation;
constexpr AttentionImplementation kBackends[] = {AttentionImplementation::cudnn, AttentionImplementation::cudnn_deterministic,
                                          AttentionImplementation::kernels};

class Attention : public ::testing::TestWithParam<std::tuple<AttentionCase, AttentionImplementation>> {};

TEST_P(Attention, ForwardAndBackwardMatchFloat64) {
  REQUIRE_GPU();
  const auto [c, backend] = GetParam();
  gpu::Attention attention(backend);
  const int D = c.head_dim;
  const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * D, kv_width = c.kv_heads * D;
  // Fused layout: one [tokens, q | k | v] buffer, as the QKV projection writes it.
  const std::int64_t q_stride = c.fused_qkv ? q_width + 2 * kv_width : q_width;
  const std::int64_t kv_stride = c.fused_qkv ? q_width + 2 * kv_width : kv_width;
  gpu::DeviceBuffer fused, qb, kb, vb;
  const B *q, *kp, *v;
  if (c.fused_qkv) {
    fused = random_bf16(tokens * q_stride, 2.0);
    q = static_cast<const B*>(fused.data());
    kp = q + q_width;
    v = kp + kv_width;
  } else {
    qb = random_bf16(tokens * q_width, 2.0);
    kb = random_bf16(tokens * kv_width, 2.0);
    vb = random_bf16(tokens * kv_width);
    q = static_cast<const B*>(qb.data()), kp = static_cast<const B*>(kb.data()), v = static_cast<const B*>(vb.data());
  }
  auto dout = random_bf16(tokens * q_width);
  auto o = poisoned(tokens * q_width * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
  // Gradients keep q's and k's layouts: strided into a poisoned fused buffer when the inputs are fused.
  auto dfused = poisoned(tokens * q_stride * 2);
  auto dqb = poisoned(tokens * q_width * 2), dkb = poisoned(tokens * kv_width * 2), dvb = poisoned(tokens * kv_width * 2);
  B* dq = c.fused_qkv ? static_cast<B*>(dfused.data()) : static_cast<B*>(dqb.data());
  B* dk = c.fused_qkv ? dq + q_width : static_cast<B*>(dkb.data());
  B* dv = c.fused_qkv ? dk + kv_width : static_cast<B*>(dvb.data());
  k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, D, q_stride, kv_stride, c.causal};
  dims.window = c.window;
  dims.softcap = static_cast<float>(c.softcap);
  attention.forward(q, kp, v, static_cast<B*>(o.data()), static_cast<float*>(lse.data()), dims, nullptr);
  attention.backward(q, kp, v, static_cast<B*>(o.data()), static_cast<B*>(dout.data()),
                     static_cast<float*>(lse.data()), dq, dk, dv, dims, nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());

  const auto hq = bf16_to_host(q, (tokens - 1) * q_stride + q_width);
  const auto hk = bf16_to_host(kp, (tokens - 1) * kv_stride + kv_width);
  const auto hv = bf16_to_host(v, (tokens - 1) * kv_stride + kv_width);
  const auto hdo = bf16_to_host(dout.data(), tokens * q_width);
  const AttentionReference r = attention_reference(c, hq, hk, hv, hdo, q_stride, kv_stride);
  const auto got_dq = compact_rows(bf16_to_host(dq, (tokens - 1) * q_stride + q_width), tokens, q_width, q_stride);
  const auto got_dk = compact_rows(bf16_to_host(dk, (tokens - 1) * kv_stride + kv_width), tokens, kv_width, kv_stride);
  const auto got_dv = compact_rows(bf16_to_host(dv, (tokens - 1) * kv_stride + kv_width), tokens, kv_width, kv_stride);
  char name[160];
  std::snprintf(name, sizeof name, "%s b=%lld s=%lld h=%d kvh=%d d=%d%s%s window=%lld softcap=%g", to_string(backend),
                (long long)c.batch, (long long)c.seq, c.heads, c.kv_heads, D, c.causal ? " causal" : "",
                c.fused_qkv ? " fused" : "", (long long)c.window, c.softcap);
  const double errors[5] = {relative_error(bf16_to_host(o.data(), tokens * q_width), r.o),
                            relative_error(f32_to_host(lse.data(), r.lse.size()), r.lse),
                            relative_error(got_dq, r.dq), relative_error(got_dk, r.dk), relative_error(got_dv, r.dv)};
  std::printf("[kernel-error] attention %s: O %.2e lse %.2e dQ %.2e dK %.2e dV %.2e\n", name, errors[0], errors[1],
              errors[2], errors[3], errors[4]);
  EXPECT_LT(errors[0], kBf16Tolerance) << name;
  EXPECT_LT(errors[1], 1e-5) << name;
  EXPECT_LT(errors[2], kBf16Tolerance) << name;
  EXPECT_LT(errors[3], kBf16Tolerance) << name;
  EXPECT_LT(errors[4], kBf16Tolerance) << name;
  if (c.softcap > 0 && c.softcap <= 5) {  // the cap bends these scores: an uncapped kernel would miss by far more
    AttentionCase uncapped = c;
    uncapped.softcap = 0;
    const AttentionReference plain = attention_reference(uncapped, hq, hk, hv, hdo, q_stride, kv_stride);
    EXPECT_GT(relative_error(plain.o, r.o), 5 * kBf16Tolerance) << name;
    EXPECT_GT(relative_error(plain.dq, r.dq), 5 * kBf16Tolerance) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Attention,
                         ::testing::Combine(::testing::Values(AttentionCase{1, 256, 4, 2, 64, true, false},
                                                              AttentionCase{2, 256, 4, 4, 128, true, true},
                                                              AttentionCase{1, 1024, 8, 2, 128, true, false},
                                                              AttentionCase{1, 1024, 4, 1, 64, true, true},
                                                              AttentionCase{1, 203, 6, 2, 64, true, false},
                                                              AttentionCase{2, 130, 2, 2, 128, false, false},
                                                              AttentionCase{1, 77, 4, 2, 128, false, true},
                                                              AttentionCase{1, 200, 4, 1, 128, true, true}),
                                            ::testing::ValuesIn(kBackends)));

// Sliding windows: shorter than the sequence and no multiple of a tile (the kernels' 64 and 32, cuDNN's), a multiple
// of them, one key (each query itself), the whole sequence and more (the causal mask).
INSTANTIATE_TEST_SUITE_P(Windows, Attention,
                         ::testing::Combine(::testing::Values(AttentionCase{1, 256, 4, 2, 64, true, false, 0, 100},
                                                              AttentionCase{1, 1024, 8, 2, 128, true, true, 0, 300},
                                                              AttentionCase{2, 203, 6, 2, 64, true, false, 0, 64},
                                                              AttentionCase{1, 130, 2, 2, 128, true, false, 0, 1},
                                                              AttentionCase{2, 256, 4, 4, 128, true, false, 0, 256},
                                                              AttentionCase{1, 200, 4, 1, 128, true, true, 0, 1000}),
                                            ::testing::ValuesIn(kBackends)));

// Soft-capped scores (Gemma-2's attn_logit_softcapping): caps small enough that the tanh bends most scores (the
// inputs' scores reach tens), with the causal mask, a window, GQA, a fused layout and no mask; Gemma-2's head dim 256
// on the cuDNN backends (the kernels run 64 and 128).
INSTANTIATE_TEST_SUITE_P(Softcaps, Attention,
                         ::testing::Combine(::testing::Values(AttentionCase{1, 256, 4, 2, 64, true, false, 0, 0, 5},
                                                              AttentionCase{2, 203, 6, 2, 128, true, true, 0, 64, 20},
                                                              AttentionCase{1, 130, 2, 2, 128, false, false, 0, 0, 1},
                                                              AttentionCase{1, 1024, 8, 2, 128, true, false, 0, 0, 50}),
                                            ::testing::ValuesIn(kBackends)));
INSTANTIATE_TEST_SUITE_P(SoftcapsHeadDim256, Attention,
                         ::testing::Combine(::testing::Values(AttentionCase{1, 256, 4, 2, 256, true, false, 0, 0, 5},
                                                              AttentionCase{2, 130, 4, 4, 256, true, true, 0, 0, 50}),
                                            ::testing::Values(AttentionImplementation::cudnn,
                                                              AttentionImplementation::cudnn_deterministic)));

// The reference's soft-capped gradient against central differences of its own loss, sum(O * dO): the float64 the
// kernels are held to is itself right.
TEST(AttentionReferenceSoftcap, GradientMatchesCentralDifferences) {
  const AttentionCase c{1, 9, 2, 1, 8, true, false, 0, 0, 0.7};
  std::vector<double> q(9 * 16), kv(9 * 8), v(9 * 8), dout(9 * 16);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37 * double(i) + 0.1) * 1.5;
  for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = std::cos(0.53 * double(i)) * 1.5;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.71 * double(i) + 0.4);
  for (std::size_t i = 0; i < dout.size(); ++i) dout[i] = std::cos(0.29 * double(i) + 0.2);
  const auto loss = [&](const std::vector<double>& qq, const std::vector<double>& kk) {
    const AttentionReference r = attention_reference(c, qq, kk, v, dout, 16, 8);
    double sum = 0;
    for (std::size_t i = 0; i < r.o.size(); ++i) sum += r.o[i] * dout[i];
    return sum;
  };
  const AttentionReference r = attention_reference(c, q, kv, v, dout, 16, 8);
  const double h = 1e-6;
  for (std::size_t i : {0u, 17u, 63u, 100u, 143u}) {
    auto up = q, down = q;
    up[i] += h, down[i] -= h;
    EXPECT_NEAR(r.dq[i], (loss(up, kv) - loss(down, kv)) / (2 * h), 1e-6) << "dq " << i;
  }
  for (std::size_t i : {0u, 9u, 40u, 71u}) {
    auto up = kv, down = kv;
    up[i] += h, down[i] -= h;
    EXPECT_NEAR(r.dk[i], (loss(q, up) - loss(q, down)) / (2 * h), 1e-6) << "dk " << i;
  }
}

// The deterministic implementations give the same bits for the same inputs (what keeps recompute and
// pipelined runs bit-identical); the result of cuDNN's atomic backward is only printed.
TEST(AttentionDeterminism, SameInputsSameBits) {
  REQUIRE_GPU();
  const AttentionCase c{2, 1024, 8, 2, 128, true, true};
  const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const std::int64_t stride = q_width + 2 * kv_width;
  auto qkv = random_bf16(tokens * stride, 2.0), dout = random_bf16(tokens * q_width);
  const k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, stride, stride, c.causal};
  const auto* q = static_cast<const B*>(qkv.data());
  for (AttentionImplementation backend : kBackends) {
    gpu::Attention attention(backend);
    std::vector<std::vector<double>> runs;
    for (int run = 0; run < 2; ++run) {
      auto o = poisoned(tokens * q_width * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
      auto d_qkv = poisoned(tokens * stride * 2);
      B* dq = static_cast<B*>(d_qkv.data());
      attention.forward(q, q + q_width, q + q_width + kv_width, static_cast<B*>(o.data()),
                        static_cast<float*>(lse.data()), dims, nullptr);
      attention.backward(q, q + q_width, q + q_width + kv_width, static_cast<B*>(o.data()),
                         static_cast<B*>(dout.data()), static_cast<float*>(lse.data()), dq, dq + q_width,
                         dq + q_width + kv_width, dims, nullptr);
      auto values = bf16_to_host(o.data(), tokens * q_width);
      const auto grads = bf16_to_host(d_qkv.data(), tokens * stride);
      values.insert(values.end(), grads.begin(), grads.end());
      runs.push_back(std::move(values));
    }
    const bool same = runs[0] == runs[1];
    std::printf("[determinism] attention %s: two runs %s\n", to_string(backend),
                same ? "bit-identical" : "differ");
    if (backend != AttentionImplementation::cudnn) {
      EXPECT_TRUE(same) << to_string(backend);
    }
  }
}

// A window of at least the sequence is the causal mask: every backend gives the causal run's bits (the
// deterministic ones; cuDNN's atomic backward only its forward's).
TEST(AttentionWindow, WholeSequenceWindowIsCausal) {
  REQUIRE_GPU();
  const AttentionCase c{1, 512, 8, 2, 128, true, false};
  const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  auto q = random_bf16(tokens * q_width, 2.0), kb = random_bf16(tokens * kv_width, 2.0);
  auto v = random_bf16(tokens * kv_width), dout = random_bf16(tokens * q_width);
  const auto as_bf16 = [](gpu::DeviceBuffer& b) { return static_cast<B*>(b.data()); };
  for (AttentionImplementation backend : kBackends) {
    gpu::Attention attention(backend);
    std::vector<std::vector<double>> runs;
    for (std::int64_t window : {std::int64_t{0}, c.seq, 4 * c.seq}) {
      k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, 0, 0, true};
      dims.window = window;
      auto o = poisoned(tokens * q_width * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
      auto dq = poisoned(tokens * q_width * 2), dk = poisoned(tokens * kv_width * 2);
      auto dv = poisoned(tokens * kv_width * 2);
      attention.forward(as_bf16(q), as_bf16(kb), as_bf16(v), as_bf16(o), static_cast<float*>(lse.data()), dims,
                        nullptr);
      attention.backward(as_bf16(q), as_bf16(kb), as_bf16(v), as_bf16(o), as_bf16(dout),
                         static_cast<float*>(lse.data()), as_bf16(dq), as_bf16(dk), as_bf16(dv), dims, nullptr);
      auto values = bf16_to_host(o.data(), tokens * q_width);
      if (backend != AttentionImplementation::cudnn)
        for (gpu::DeviceBuffer* g : {&dq, &dk, &dv}) {
          const auto grads = bf16_to_host(g->data(), g->bytes() / 2);
          values.insert(values.end(), grads.begin(), grads.end());
        }
      runs.push_back(std::move(values));
    }
    EXPECT_EQ(runs[0], runs[1]) << to_string(backend) << ": window of the sequence";
    EXPECT_EQ(runs[0], runs[2]) << to_string(backend) << ": window of four sequences";
  }
}

// Throughput of each implementation at Llama-8B-like shapes, printed for the record; FLOPs by
// FlashAttention's convention (causal: half of 4 b h s^2 d forward, 2.5 times that backward). It checks that
// every lse is finite.
TEST(AttentionSpeed, CausalGqa) {
  REQUIRE_GPU();
  for (const AttentionCase c : {AttentionCase{1, 4096, 32, 8, 128, true, false}, AttentionCase{2, 4096, 32, 32, 128, true, false}})
    for (AttentionImplementation backend : kBackends) {
      gpu::Attention attention(backend);
      const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
      auto q = random_bf16(tokens * q_width), kb = random_bf16(tokens * kv_width), v = random_bf16(tokens * kv_width);
      auto dout = random_bf16(tokens * q_width);
      auto o = poisoned(tokens * q_width * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
      auto dq = poisoned(tokens * q_width * 2), dk = poisoned(tokens * kv_width * 2);
      auto dv = poisoned(tokens * kv_width * 2);
      const k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, 0, 0, c.causal};
      const auto as_bf16 = [](gpu::DeviceBuffer& b) { return static_cast<B*>(b.data()); };
      const auto forward = [&] {
        attention.forward(as_bf16(q), as_bf16(kb), as_bf16(v), as_bf16(o), static_cast<float*>(lse.data()), dims,
                          nullptr);
      };
      const auto backward = [&] {
        attention.backward(as_bf16(q), as_bf16(kb), as_bf16(v), as_bf16(o), as_bf16(dout),
                           static_cast<float*>(lse.data()), as_bf16(dq), as_bf16(dk), as_bf16(dv), dims, nullptr);
      };
      const double forward_ms = median_ms(forward, 9), backward_ms = median_ms(backward, 7);
      const double forward_flop = 2.0 * c.batch * c.heads * double(c.seq) * c.seq * c.head_dim;
      std::printf("[kernel-speed] attention %s b=%lld s=%lld h=%d kvh=%d d=%d causal: forward %.3f ms %.1f TFLOP/s, "
                  "backward %.3f ms %.1f TFLOP/s\n",
                  to_string(backend), (long long)c.batch, (long long)c.seq, c.heads, c.kv_heads, c.head_dim,
                  forward_ms, forward_flop / forward_ms * 1e-9, backward_ms, 2.5 * forward_flop / backward_ms * 1e-9);
      const auto host_lse = f32_to_host(lse.data(), c.batch * c.heads * c.seq);
      EXPECT_TRUE(std::all_of(host_lse.begin(), host_lse.end(), [](double x) { return std::isfinite(x); }));
    }
}

}  // namespace
}  // namespace twin::test
