// Attention dropout inside cuDNN's fused attention (gpu/attention.hpp, AttentionDropout). The mask is read back
// through the forward itself: with V one-hot (key j's value row e_j, seq <= head_dim), O[i, j] is the probability
// (i, j) as it multiplied V, 0 where dropped and P_ij / (1 - p) where kept. Checked: the kept ones against a float64
// reference, the dropped fraction against p (a binomial count), one mask for one seed and another for another;
// then, with that mask, the forward and backward of random inputs against the float64 reference with dropout, for
// both cuDNN backends; and the kernels backend refuses dropout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"
#include "tests/gpu/attention_reference.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using B = k::bf16;
using twin::AttentionImplementation;

// Two sequences, GQA 4/2, 64 keys as wide as the head: the one-hot values fit.
const AttentionCase kCase{2, 64, 4, 2, 64, true, false};
constexpr double kDropout = 0.25;

k::AttentionDims dims_of(const AttentionCase& c) {
  return {c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, c.heads * c.head_dim, c.kv_heads * c.head_dim, c.causal};
}

// V with key j's row of every group e_j.
std::vector<double> one_hot_values(const AttentionCase& c) {
  std::vector<double> v(c.batch * c.seq * c.kv_heads * c.head_dim, 0.0);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t j = 0; j < c.seq; ++j)
      for (int g = 0; g < c.kv_heads; ++g) v[((b * c.seq + j) * c.kv_heads + g) * c.head_dim + j] = 1;
  return v;
}

std::vector<__nv_bfloat16> to_bf16(const std::vector<double>& x) {
  std::vector<__nv_bfloat16> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = __float2bfloat16(static_cast<float>(x[i]));
  return out;
}

struct Inputs {
  gpu::DeviceBuffer q, k;
  std::vector<double> hq, hk;
};
Inputs random_queries_and_keys(const AttentionCase& c) {
  Inputs in{random_bf16(c.batch * c.seq * c.heads * c.head_dim, 2.0),
            random_bf16(c.batch * c.seq * c.kv_heads * c.head_dim, 2.0), {}, {}};
  in.hq = bf16_to_host(in.q.data(), c.batch * c.seq * c.heads * c.head_dim);
  in.hk = bf16_to_host(in.k.data(), c.batch * c.seq * c.kv_heads * c.head_dim);
  return in;
}

// The forward's O with one-hot values under `seed`: O[(b * S + i) * H + h][j] = the used probability (i, j).
std::vector<double> used_probabilities(gpu::Attention& attention, const Inputs& in, std::int64_t seed) {
  const AttentionCase& c = kCase;
  auto v = upload(to_bf16(one_hot_values(c)));
  auto o = poisoned(c.batch * c.seq * c.heads * c.head_dim * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
  attention.forward(static_cast<const B*>(in.q.data()), static_cast<const B*>(in.k.data()),
                    static_cast<const B*>(v.data()), static_cast<B*>(o.data()), static_cast<float*>(lse.data()),
                    dims_of(c), nullptr, {static_cast<float>(kDropout), seed});
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  return bf16_to_host(o.data(), c.batch * c.seq * c.heads * c.head_dim);
}

// The mask the forward drew, from its used probabilities against the reference's undropped ones (`reference_o`,
// from one-hot values: P itself); counts the causal elements whose used value is neither 0 nor P / (1 - p).
DropoutMask read_mask(const std::vector<double>& used, const std::vector<double>& reference_o, int& inconsistent) {
  const AttentionCase& c = kCase;
  const std::int64_t S = c.seq;
  DropoutMask mask{std::vector<std::uint8_t>(c.batch * c.heads * S * S, 0), kDropout};
  inconsistent = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (std::int64_t i = 0; i < S; ++i)
        for (std::int64_t j = 0; j <= i; ++j) {
          const std::size_t at = ((b * S + i) * c.heads + h) * c.head_dim + j;
          const double kept_value = reference_o[at] / (1 - kDropout), got = used[at];
          const bool kept = std::abs(got - kept_value) <= 0.02 * kept_value + 1e-6;
          if (!kept && std::abs(got) > 1e-6) ++inconsistent;
          mask.keep[((b * c.heads + h) * S + i) * S + j] = kept;
        }
  return mask;
}

double dropped_fraction(const DropoutMask& mask) {
  const std::int64_t S = kCase.seq;
  std::int64_t dropped = 0, total = 0;
  for (std::int64_t bh = 0; bh < kCase.batch * kCase.heads; ++bh)
    for (std::int64_t i = 0; i < S; ++i)
      for (std::int64_t j = 0; j <= i; ++j, ++total) dropped += !mask.keep[(bh * S + i) * S + j];
  return static_cast<double>(dropped) / static_cast<double>(total);
}

class AttentionDropoutTest : public ::testing::TestWithParam<AttentionImplementation> {};

TEST_P(AttentionDropoutTest, MaskIsBernoulliAndKeyedBySeed) {
  REQUIRE_GPU();
  const AttentionCase& c = kCase;
  gpu::Attention attention(GetParam());
  const Inputs in = random_queries_and_keys(c);
  const std::vector<double> hv = one_hot_values(c), hdo(c.batch * c.seq * c.heads * c.head_dim, 0.0);
  const AttentionReference plain = attention_reference(c, in.hq, in.hk, hv, hdo, c.heads * c.head_dim,
                                                       c.kv_heads * c.head_dim);
  int inconsistent = 0, inconsistent_again = 0, inconsistent_other = 0;
  const DropoutMask mask = read_mask(used_probabilities(attention, in, 11), plain.o, inconsistent);
  const DropoutMask again = read_mask(used_probabilities(attention, in, 11), plain.o, inconsistent_again);
  const DropoutMask other = read_mask(used_probabilities(attention, in, 12), plain.o, inconsistent_other);
  EXPECT_EQ(inconsistent + inconsistent_again + inconsistent_other, 0) << "used probabilities neither 0 nor P/(1-p)";
  // 16,640 causal elements: the binomial count's standard deviation is 0.0034 of them at p = 0.25.
  const double fraction = dropped_fraction(mask);
  std::printf("[attention-dropout] %s: dropped %.4f of the probabilities at p %.2f\n", to_string(GetParam()),
              fraction, kDropout);
  EXPECT_NEAR(fraction, kDropout, 0.02);
  EXPECT_EQ(mask.keep, again.keep) << "one seed, one mask";
  std::int64_t differing = 0;
  for (std::size_t e = 0; e < mask.keep.size(); ++e) differing += mask.keep[e] != other.keep[e];
  // Independent masks differ in 2 p (1 - p) = 37.5% of the causal elements (~6,240 of 16,640).
  EXPECT_GT(differing, 5000) << "another seed, another mask";
}

TEST_P(AttentionDropoutTest, ForwardAndBackwardMatchFloat64WithTheMask) {
  REQUIRE_GPU();
  const AttentionCase& c = kCase;
  gpu::Attention attention(GetParam());
  const Inputs in = random_queries_and_keys(c);
  const std::int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim, tokens = c.batch * c.seq;
  int inconsistent = 0;
  const std::vector<double> zeros(tokens * q_width, 0.0);
  const AttentionReference plain = attention_reference(c, in.hq, in.hk, one_hot_values(c), zeros, q_width, kv_width);
  const DropoutMask mask = read_mask(used_probabilities(attention, in, 5), plain.o, inconsistent);
  ASSERT_EQ(inconsistent, 0);

  auto v = random_bf16(tokens * kv_width), dout = random_bf16(tokens * q_width);
  auto o = poisoned(tokens * q_width * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
  auto dq = poisoned(tokens * q_width * 2), dk = poisoned(tokens * kv_width * 2), dv = poisoned(tokens * kv_width * 2);
  const gpu::AttentionDropout dropout{static_cast<float>(kDropout), 5};
  const auto* q = static_cast<const B*>(in.q.data());
  const auto* kp = static_cast<const B*>(in.k.data());
  attention.forward(q, kp, static_cast<const B*>(v.data()), static_cast<B*>(o.data()), static_cast<float*>(lse.data()),
                    dims_of(c), nullptr, dropout);
  attention.backward(q, kp, static_cast<const B*>(v.data()), static_cast<B*>(o.data()), static_cast<B*>(dout.data()),
                     static_cast<float*>(lse.data()), static_cast<B*>(dq.data()), static_cast<B*>(dk.data()),
                     static_cast<B*>(dv.data()), dims_of(c), nullptr, dropout);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  const AttentionReference r = attention_reference(c, in.hq, in.hk, bf16_to_host(v.data(), tokens * kv_width),
                                                   bf16_to_host(dout.data(), tokens * q_width), q_width, kv_width, 0,
                                                   &mask);
  const double errors[5] = {relative_error(bf16_to_host(o.data(), tokens * q_width), r.o),
                            relative_error(f32_to_host(lse.data(), r.lse.size()), r.lse),
                            relative_error(bf16_to_host(dq.data(), tokens * q_width), r.dq),
                            relative_error(bf16_to_host(dk.data(), tokens * kv_width), r.dk),
                            relative_error(bf16_to_host(dv.data(), tokens * kv_width), r.dv)};
  std::printf("[kernel-error] attention dropout %s: O %.2e lse %.2e dQ %.2e dK %.2e dV %.2e\n",
              to_string(GetParam()), errors[0], errors[1], errors[2], errors[3], errors[4]);
  EXPECT_LT(errors[0], kBf16Tolerance);
  EXPECT_LT(errors[1], 1e-5);  // the statistics are the undropped softmax's
  EXPECT_LT(errors[2], kBf16Tolerance);
  EXPECT_LT(errors[3], kBf16Tolerance);
  EXPECT_LT(errors[4], kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(CudnnBackends, AttentionDropoutTest,
                         ::testing::Values(AttentionImplementation::cudnn,
                                           AttentionImplementation::cudnn_deterministic));

TEST(AttentionDropout, KernelsBackendRefusesIt) {
  REQUIRE_GPU();
  gpu::Attention attention(AttentionImplementation::kernels);
  const AttentionCase& c = kCase;
  auto q = random_bf16(c.batch * c.seq * c.heads * c.head_dim), kv = random_bf16(c.batch * c.seq * c.kv_heads * c.head_dim);
  auto o = poisoned(c.batch * c.seq * c.heads * c.head_dim * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
  EXPECT_THROW(attention.forward(static_cast<const B*>(q.data()), static_cast<const B*>(kv.data()),
                                 static_cast<const B*>(kv.data()), static_cast<B*>(o.data()),
                                 static_cast<float*>(lse.data()), dims_of(c), nullptr, {0.1f, 1}),
               std::invalid_argument);
}

// What dropout costs the fused kernels, over training shapes (causal, cuDNN): the time with dropout 0.1 over the time
// without, and the difference per drawn element (b h s^2 / 2, the causal scores the simulator prices), printed, not
// asserted (speed is recorded in docs/ACCURACY.md from the device logs, where the simulator's price is compared).
TEST(AttentionDropoutSpeed, CausalShapesWithAndWithout) {
  REQUIRE_GPU();
  for (const AttentionCase c : {AttentionCase{1, 4096, 32, 8, 128, true, false}, AttentionCase{1, 2048, 16, 16, 64, true, false},
                                AttentionCase{1, 8192, 32, 8, 128, true, false}, AttentionCase{2, 4096, 48, 8, 128, true, false},
                                AttentionCase{4, 1024, 32, 32, 128, true, false}}) {
    gpu::Attention attention(AttentionImplementation::cudnn);
    const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
    auto q = random_bf16(tokens * q_width), kb = random_bf16(tokens * kv_width), v = random_bf16(tokens * kv_width);
    auto dout = random_bf16(tokens * q_width);
    auto o = poisoned(tokens * q_width * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
    auto dq = poisoned(tokens * q_width * 2), dk = poisoned(tokens * kv_width * 2), dv = poisoned(tokens * kv_width * 2);
    const k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, 0, 0, c.causal};
    const auto as_bf16 = [](gpu::DeviceBuffer& b) { return static_cast<B*>(b.data()); };
    double ms[2][2] = {};
    for (int with = 0; with < 2; ++with) {
      const gpu::AttentionDropout dropout{with ? 0.1f : 0.0f, 42};
      ms[with][0] = median_ms([&] {
        attention.forward(as_bf16(q), as_bf16(kb), as_bf16(v), as_bf16(o), static_cast<float*>(lse.data()), dims,
                          nullptr, dropout);
      }, 9);
      ms[with][1] = median_ms([&] {
        attention.backward(as_bf16(q), as_bf16(kb), as_bf16(v), as_bf16(o), as_bf16(dout),
                           static_cast<float*>(lse.data()), as_bf16(dq), as_bf16(dk), as_bf16(dv), dims, nullptr,
                           dropout);
      }, 7);
    }
    const double drawn = 0.5 * c.batch * c.heads * double(c.seq) * c.seq;
    std::printf("[attention-dropout-cost] b=%lld s=%lld h=%d kvh=%d d=%d causal: forward %.3f -> %.3f ms (%+.1f%%, "
                "%.3f ps per drawn element), backward %.3f -> %.3f ms (%+.1f%%, %.3f ps per drawn element)\n",
                (long long)c.batch, (long long)c.seq, c.heads, c.kv_heads, c.head_dim, ms[0][0], ms[1][0],
                100 * (ms[1][0] / ms[0][0] - 1), (ms[1][0] - ms[0][0]) * 1e9 / drawn, ms[0][1], ms[1][1],
                100 * (ms[1][1] / ms[0][1] - 1), (ms[1][1] - ms[0][1]) * 1e9 / drawn);
    const auto host_lse = f32_to_host(lse.data(), c.batch * c.heads * c.seq);
    EXPECT_TRUE(std::all_of(host_lse.begin(), host_lse.end(), [](double x) { return std::isfinite(x); }));
  }
}

}  // namespace
}  // namespace twin::test
