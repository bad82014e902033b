// Attention with gpt-oss's sinks, as the executor runs it (gpu::launch of AttentionForward and AttentionBackward with
// a sinks pointer: each backend's plain attention, then kernels::attention_sinks_*), against the float64 reference
// with the sinks in every row's softmax: O, lse, dQ, dK, dV and the sinks' own gradient, for every backend, with GQA,
// a fused layout, a sliding window, soft-capped scores and cuDNN's head dim 256. The sinks are large enough to take
// a good part of each row's probability, so a run that ignored them misses by far more than the tolerance. Also:
// the reference's sink gradient against central differences, accumulation into the gradient, and the same bits
// twice.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"
#include "gpu/op_kernels.hpp"
#include "tests/gpu/attention_reference.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using B = k::bf16;
using twin::AttentionImplementation;

// Sinks around the rows' log-sum-exp of these inputs (scores of a few units over up to 1,024 keys): from 0 to 8.
std::vector<double> sink_values(int heads) {
  std::vector<double> host(heads);
  for (int h = 0; h < heads; ++h) host[h] = 4 + 4 * std::sin(1.3 * h + 0.5);
  return host;
}

gpu::DeviceBuffer upload_bf16(std::vector<double>& values) {  // rounds `values` to what the GPU holds
  std::vector<__nv_bfloat16> host(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    host[i] = __float2bfloat16(static_cast<float>(values[i]));
    values[i] = __bfloat162float(host[i]);
  }
  return upload(host);
}

// One forward and backward with sinks on `backend`, inputs contiguous; what the GPU gave, as doubles.
struct SinkRun {
  std::vector<double> q, k, v, dout, sinks;                // the inputs
  std::vector<double> o, lse, dq, dk, dv, dsinks, dsinks2;  // dsinks2: a second backward accumulated onto the first
};

SinkRun run_with_sinks(const AttentionCase& c, AttentionImplementation backend) {
  gpu::Attention attention(backend);
  const std::int64_t tokens = c.batch * c.seq, q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  SinkRun run;
  run.sinks = sink_values(c.heads);
  auto q = random_bf16(tokens * q_width, 2.0), kb = random_bf16(tokens * kv_width, 2.0);
  auto v = random_bf16(tokens * kv_width), dout = random_bf16(tokens * q_width), sinks = upload_bf16(run.sinks);
  auto o = poisoned(tokens * q_width * 2), lse = poisoned(c.batch * c.heads * c.seq * 4);
  auto dq = poisoned(tokens * q_width * 2), dk = poisoned(tokens * kv_width * 2), dv = poisoned(tokens * kv_width * 2);
  auto d_sinks = poisoned(c.heads * 2);
  k::AttentionDims dims{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, 0, 0, c.causal};
  dims.window = c.window;
  dims.softcap = static_cast<float>(c.softcap);
  gpu::launch(gpu::AttentionForward{&attention, bf(q), bf(kb), bf(v), bf(o), f32(lse), dims, {}, bf(sinks)}, nullptr);
  gpu::AttentionBackward backward{&attention, bf(q), bf(kb), bf(v), bf(o), bf(dout), f32(lse), bf(dq), bf(dk),
                                  bf(dv), dims, {}, bf(sinks), bf(d_sinks), false};
  gpu::launch(backward, nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  run.dsinks = bf16_to_host(d_sinks.data(), c.heads);
  backward.accumulate_sinks = true;
  gpu::launch(backward, nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  run.dsinks2 = bf16_to_host(d_sinks.data(), c.heads);
  run.q = bf16_to_host(q.data(), tokens * q_width), run.k = bf16_to_host(kb.data(), tokens * kv_width);
  run.v = bf16_to_host(v.data(), tokens * kv_width), run.dout = bf16_to_host(dout.data(), tokens * q_width);
  run.o = bf16_to_host(o.data(), tokens * q_width), run.lse = f32_to_host(lse.data(), c.batch * c.heads * c.seq);
  run.dq = bf16_to_host(dq.data(), tokens * q_width), run.dk = bf16_to_host(dk.data(), tokens * kv_width);
  run.dv = bf16_to_host(dv.data(), tokens * kv_width);
  return run;
}

// max |got - want| over max `scale`: an error relative to the size of what was summed.
double scaled_error(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& scale) {
  double worst = 0, size = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::isfinite(got[i]) ? std::abs(got[i] - want[i]) : INFINITY);
    size = std::max(size, scale[i]);
  }
  return worst / size;
}

// The sinks' gradient in float64 from the forward's O' and lse' as the GPU left them: -sum over rows of
// exp(sink - lse') rowsum(dO O'), per head.
std::vector<double> sink_gradient(const AttentionCase& c, const std::vector<double>& o, const std::vector<double>& dout,
                                  const std::vector<double>& lse, const std::vector<double>& sinks) {
  std::vector<double> d(c.heads, 0);
  const int dv = c.v_head_dim ? c.v_head_dim : c.head_dim;
  for (std::int64_t token = 0; token < c.batch * c.seq; ++token)
    for (int h = 0; h < c.heads; ++h) {
      double dot = 0;
      for (int e = 0; e < dv; ++e) dot += o[(token * c.heads + h) * dv + e] * dout[(token * c.heads + h) * dv + e];
      const double l = lse[(token / c.seq * c.heads + h) * c.seq + token % c.seq];
      d[h] -= std::exp(sinks[h] - l) * dot;
    }
  return d;
}

class AttentionSinks : public ::testing::TestWithParam<std::tuple<AttentionCase, AttentionImplementation>> {};

TEST_P(AttentionSinks, ForwardAndBackwardMatchFloat64) {
  REQUIRE_GPU();
  const auto [c, backend] = GetParam();
  const SinkRun got = run_with_sinks(c, backend);
  const std::int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const AttentionReference r =
      attention_reference(c, got.q, got.k, got.v, got.dout, q_width, kv_width, 0, nullptr, &got.sinks);
  char name[160];
  std::snprintf(name, sizeof name, "%s b=%lld s=%lld h=%d kvh=%d d=%d%s window=%lld softcap=%g", to_string(backend),
                (long long)c.batch, (long long)c.seq, c.heads, c.kv_heads, c.head_dim, c.causal ? " causal" : "",
                (long long)c.window, c.softcap);
  // The sinks' gradient sums terms that cancel: against the reference it is held to the rounding of its terms (their
  // magnitudes' scale), and against float64 of the GPU's own O', dO and lse' to its own bf16 rounding.
  const double dsinks_error = scaled_error(got.dsinks, r.dsinks, r.dsinks_magnitude);
  const std::vector<double> own = sink_gradient(c, got.o, got.dout, got.lse, got.sinks);
  const double errors[7] = {relative_error(got.o, r.o),   relative_error(got.lse, r.lse),
                            relative_error(got.dq, r.dq), relative_error(got.dk, r.dk),
                            relative_error(got.dv, r.dv), dsinks_error, relative_error(got.dsinks, own)};
  std::printf("[kernel-error] attention sinks %s: O %.2e lse %.2e dQ %.2e dK %.2e dV %.2e dsinks %.2e (own inputs "
              "%.2e)\n", name, errors[0], errors[1], errors[2], errors[3], errors[4], errors[5], errors[6]);
  for (int i : {0, 2, 3, 4, 5, 6}) EXPECT_LT(errors[i], kBf16Tolerance) << name << " output " << i;
  EXPECT_LT(errors[1], 1e-5) << name;
  // A second backward accumulated onto the first: twice the gradient (bf16 rounding of the sum allowed).
  std::vector<double> twice(own);
  for (double& x : twice) x *= 2;
  EXPECT_LT(relative_error(got.dsinks2, twice), kBf16Tolerance) << name << " accumulated";
  // The sinks take enough of each row that attention without them is far off.
  const AttentionReference plain = attention_reference(c, got.q, got.k, got.v, got.dout, q_width, kv_width);
  EXPECT_GT(relative_error(plain.o, r.o), 5 * kBf16Tolerance) << name;
  EXPECT_GT(relative_error(plain.dq, r.dq), 5 * kBf16Tolerance) << name;
}

constexpr AttentionImplementation kBackends[] = {AttentionImplementation::cudnn,
                                                 AttentionImplementation::cudnn_deterministic,
                                                 AttentionImplementation::kernels};

// gpt-oss's layers: causal GQA with alternating 128-token windows; here also no mask, a window, a soft cap.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionSinks,
                         ::testing::Combine(::testing::Values(AttentionCase{1, 256, 8, 2, 64, true, false},
                                                              AttentionCase{2, 203, 4, 4, 128, true, false},
                                                              AttentionCase{1, 1024, 8, 1, 64, true, false, 0, 128},
                                                              AttentionCase{2, 130, 2, 2, 128, false, false},
                                                              AttentionCase{1, 300, 6, 2, 128, true, false, 0, 0, 20}),
                                            ::testing::ValuesIn(kBackends)));
INSTANTIATE_TEST_SUITE_P(HeadDim256, AttentionSinks,
                         ::testing::Combine(::testing::Values(AttentionCase{1, 256, 4, 2, 256, true, false}),
                                            ::testing::Values(AttentionImplementation::cudnn,
                                                              AttentionImplementation::cudnn_deterministic)));

// The reference's sink gradient (and dQ with sinks) against central differences of its loss, sum(O * dO).
TEST(AttentionSinksReference, GradientMatchesCentralDifferences) {
  const AttentionCase c{1, 9, 2, 1, 8, true, false};
  std::vector<double> q(9 * 16), kv(9 * 8), v(9 * 8), dout(9 * 16), sinks{0.3, -0.8};
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37 * double(i) + 0.1) * 1.5;
  for (std::size_t i = 0; i < kv.size(); ++i) kv[i] = std::cos(0.53 * double(i)) * 1.5;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.71 * double(i) + 0.4);
  for (std::size_t i = 0; i < dout.size(); ++i) dout[i] = std::cos(0.29 * double(i) + 0.2);
  const auto loss = [&](const std::vector<double>& qq, const std::vector<double>& ss) {
    const AttentionReference r = attention_reference(c, qq, kv, v, dout, 16, 8, 0, nullptr, &ss);
    double sum = 0;
    for (std::size_t i = 0; i < r.o.size(); ++i) sum += r.o[i] * dout[i];
    return sum;
  };
  const AttentionReference r = attention_reference(c, q, kv, v, dout, 16, 8, 0, nullptr, &sinks);
  const double h = 1e-6;
  for (std::size_t head : {0u, 1u}) {
    auto up = sinks, down = sinks;
    up[head] += h, down[head] -= h;
    EXPECT_NEAR(r.dsinks[head], (loss(q, up) - loss(q, down)) / (2 * h), 1e-6) << "dsink " << head;
    EXPECT_GT(std::abs(r.dsinks[head]), 1e-3) << "a gradient that can fail";
  }
  for (std::size_t i : {0u, 17u, 63u, 100u, 143u}) {
    auto up = q, down = q;
    up[i] += h, down[i] -= h;
    EXPECT_NEAR(r.dq[i], (loss(up, sinks) - loss(down, sinks)) / (2 * h), 1e-6) << "dq " << i;
  }
}

// The sink kernels alone against float64 of their own inputs, on both of their paths: 16-byte pieces (head dim 64)
// and single elements (head dim 36, which no attention backend runs but the kernels take), an odd token count.
TEST(AttentionSinksKernels, ForwardAndBackwardMatchFloat64OnBothPaths) {
  REQUIRE_GPU();
  for (const int dv : {64, 36}) {
    const AttentionCase c{2, 77, 6, 6, dv, true, false};
    const std::int64_t tokens = c.batch * c.seq, width = c.heads * dv, rows = c.batch * c.heads * c.seq;
    std::vector<double> sinks = sink_values(c.heads);
    auto o = random_bf16(tokens * width), dout = random_bf16(tokens * width), s = upload_bf16(sinks);
    std::vector<float> host_lse(rows);
    for (std::int64_t i = 0; i < rows; ++i) host_lse[i] = 4.f + 3.f * std::sin(0.37f * static_cast<float>(i));
    auto lse = upload(host_lse);
    const std::vector<double> o_before = bf16_to_host(o.data(), tokens * width);
    const k::AttentionSinkShape shape{c.batch, c.seq, c.heads, dv};
    auto partials = poisoned(k::attention_sink_partial_floats(shape) * 4), d_sinks = poisoned(c.heads * 2);
    k::attention_sinks_forward(bf(o), f32(lse), bf(s), shape, nullptr);
    k::attention_sinks_backward(bf(o), bf(dout), f32(lse), bf(s), f32(partials), bf(d_sinks), false, shape, nullptr);
    TWIN_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want_lse(rows), want_o(o_before);
    for (std::int64_t token = 0; token < tokens; ++token)
      for (int h = 0; h < c.heads; ++h) {
        const std::int64_t l = (token / c.seq * c.heads + h) * c.seq + token % c.seq;
        want_lse[l] = std::log(std::exp(double(host_lse[l])) + std::exp(sinks[h]));
        for (int e = 0; e < dv; ++e) want_o[(token * c.heads + h) * dv + e] *= std::exp(host_lse[l] - want_lse[l]);
      }
    const auto got_o = bf16_to_host(o.data(), tokens * width), got_lse = f32_to_host(lse.data(), rows);
    const auto want_d = sink_gradient(c, got_o, bf16_to_host(dout.data(), tokens * width), got_lse, sinks);
    EXPECT_LT(relative_error(got_o, want_o), kBf16Tolerance) << "dv " << dv;
    EXPECT_LT(relative_error(got_lse, want_lse), 1e-6) << "dv " << dv;
    EXPECT_LT(relative_error(bf16_to_host(d_sinks.data(), c.heads), want_d), kBf16Tolerance) << "dv " << dv;
  }
}

// Same inputs, same bits: the sink kernels sum in a fixed order (the deterministic backends around them).
TEST(AttentionSinksDeterminism, SameInputsSameBits) {
  REQUIRE_GPU();
  const AttentionCase c{2, 1024, 8, 2, 128, true, false};
  const std::int64_t tokens = c.batch * c.seq, width = c.heads * c.head_dim;
  std::vector<double> sinks = sink_values(c.heads);
  auto o = random_bf16(tokens * width), dout = random_bf16(tokens * width), s = upload_bf16(sinks);
  auto lse = poisoned(c.batch * c.heads * c.seq * 4);
  std::vector<float> host_lse(c.batch * c.heads * c.seq);
  for (std::size_t i = 0; i < host_lse.size(); ++i) host_lse[i] = 5.f + std::sin(0.01f * i);
  const k::AttentionSinkShape shape{c.batch, c.seq, c.heads, c.head_dim};
  auto partials = poisoned(k::attention_sink_partial_floats(shape) * 4);
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 2; ++run) {
    auto o_run = poisoned(tokens * width * 2), d_sinks = poisoned(c.heads * 2);
    TWIN_CUDA_CHECK(cudaMemcpy(o_run.data(), o.data(), tokens * width * 2, cudaMemcpyDeviceToDevice));
    TWIN_CUDA_CHECK(cudaMemcpy(lse.data(), host_lse.data(), host_lse.size() * 4, cudaMemcpyHostToDevice));
    k::attention_sinks_forward(bf(o_run), f32(lse), bf(s), shape, nullptr);
    k::attention_sinks_backward(bf(o_run), bf(dout), f32(lse), bf(s), f32(partials), bf(d_sinks), false, shape,
                                nullptr);
    TWIN_CUDA_CHECK(cudaDeviceSynchronize());
    auto values = bf16_to_host(o_run.data(), tokens * width);
    const auto grads = bf16_to_host(d_sinks.data(), c.heads), lses = f32_to_host(lse.data(), host_lse.size());
    values.insert(values.end(), grads.begin(), grads.end());
    values.insert(values.end(), lses.begin(), lses.end());
    runs.push_back(std::move(values));
  }
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace twin::test
