// The executor's elementwise, norm, embedding and loss kernels against float64 CPU references on fresh
// random inputs, with every output poisoned first (attention: kernels_attention_test; the optimizer's:
// kernels_optimizer_test; mixture of experts: kernels_moe_test).
#include <algorithm>
#include <cstdio>

#include "gpu/kernels.hpp"
#include "tests/gpu/cross_entropy_shards.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using B = k::bf16;


class KernelNorm : public ::testing::TestWithParam<std::pair<std::int64_t, std::int64_t>> {};

TEST_P(KernelNorm, RmsNormForwardBackwardAndWeightGrad) {
  REQUIRE_GPU();
  const auto [rows, cols] = GetParam();
  const std::size_t n = rows * cols;
  auto x = random_bf16(n), w = random_bf16(cols), dy = random_bf16(n), grad = random_bf16(cols);
  auto y = poisoned(n * 2), rstd = poisoned(rows * 4), dx = poisoned(n * 2), first_grad = poisoned(cols * 2);
  auto partials = poisoned(k::norm_partial_floats(rows, cols) * 4);
  // The residual-fused form: dx also adds the residual stream's gradient (skip).
  auto skip = random_bf16(n), dx_fused = poisoned(n * 2), partials_fused = poisoned(k::norm_partial_floats(rows, cols) * 4);
  const auto grad0 = bf16_to_host(grad.data(), cols);
  k::rmsnorm_forward(bf(x), bf(w), bf(y), f32(rstd), rows, cols, 1e-5f, {}, {}, nullptr);
  k::rmsnorm_backward(bf(dy), bf(x), bf(w), f32(rstd), nullptr, bf(dx), f32(partials), rows, cols, {}, {}, {}, nullptr);
  k::rmsnorm_backward(bf(dy), bf(x), bf(w), f32(rstd), bf(skip), bf(dx_fused), f32(partials_fused), rows, cols, {},
                      {}, {}, nullptr);
  k::norm_weight_grad_reduce(f32(partials), k::norm_partial_blocks(rows), cols, bf(grad), true, nullptr);
  k::norm_weight_grad_reduce(f32(partials), k::norm_partial_blocks(rows), cols, bf(first_grad), false, nullptr);
  const auto hx = bf16_to_host(x.data(), n), hw = bf16_to_host(w.data(), cols), hdy = bf16_to_host(dy.data(), n);
  std::vector<double> ry(n), rr(rows), rdx(n), rgrad(grad0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0, dot = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += hx[r * cols + c] * hx[r * cols + c];
    const double rs = 1 / std::sqrt(ss / cols + 1e-5);
    rr[r] = rs;
    for (std::int64_t c = 0; c < cols; ++c) {
      ry[r * cols + c] = hx[r * cols + c] * rs * hw[c];
      dot += hdy[r * cols + c] * hw[c] * hx[r * cols + c];
      rgrad[c] += hdy[r * cols + c] * hx[r * cols + c] * rs;
    }
    for (std::int64_t c = 0; c < cols; ++c)
      rdx[r * cols + c] = rs * hdy[r * cols + c] * hw[c] - hx[r * cols + c] * rs * rs * rs * dot / cols;
  }
  EXPECT_LT(report("rmsnorm_forward y", relative_error(bf16_to_host(y.data(), n), ry)), kBf16Tolerance);
  EXPECT_LT(report("rmsnorm_forward rstd", relative_error(f32_to_host(rstd.data(), rows), rr)), kF32Tolerance);
  EXPECT_LT(report("rmsnorm_backward dx", relative_error(bf16_to_host(dx.data(), n), rdx)), kBf16Tolerance);
  std::vector<double> rdx_fused(rdx);
  const auto hskip = bf16_to_host(skip.data(), n);
  for (std::size_t i = 0; i < n; ++i) rdx_fused[i] += hskip[i];
  EXPECT_LT(report("rmsnorm_backward dx + skip", relative_error(bf16_to_host(dx_fused.data(), n), rdx_fused)),
            kBf16Tolerance);
  EXPECT_EQ(f32_to_host(partials_fused.data(), k::norm_partial_floats(rows, cols)),
            f32_to_host(partials.data(), k::norm_partial_floats(rows, cols)))
      << "the skip changes dx only, never the weight-gradient partials";
  EXPECT_LT(report("rmsnorm weight grad (+=)", relative_error(bf16_to_host(grad.data(), cols), rgrad)), kBf16Tolerance);
  for (std::int64_t c = 0; c < cols; ++c) rgrad[c] -= grad0[c];
  EXPECT_LT(report("rmsnorm weight grad (=)", relative_error(bf16_to_host(first_grad.data(), cols), rgrad)),
            kBf16Tolerance);
}

TEST_P(KernelNorm, LayerNormForwardBackwardAndWeightGrads) {
  REQUIRE_GPU();
  const auto [rows, cols] = GetParam();
  const std::size_t n = rows * cols;
  auto x = random_bf16(n), w = random_bf16(cols), b = random_bf16(cols), dy = random_bf16(n);
  auto dw = random_bf16(cols), db = random_bf16(cols);
  auto y = poisoned(n * 2), mean = poisoned(rows * 4), rstd = poisoned(rows * 4), dx = poisoned(n * 2);
  auto partials = poisoned(2 * k::norm_partial_floats(rows, cols) * 4);
  const auto dw0 = bf16_to_host(dw.data(), cols), db0 = bf16_to_host(db.data(), cols);
  k::layernorm_forward(bf(x), bf(w), bf(b), bf(y), f32(mean), f32(rstd), rows, cols, 1e-5f, nullptr);
  k::layernorm_backward(bf(dy), bf(x), bf(w), f32(mean), f32(rstd), bf(dx), f32(partials), rows, cols, nullptr);
  const std::int64_t blocks = k::norm_partial_blocks(rows);
  k::norm_weight_grad_reduce(f32(partials), blocks, cols, bf(dw), true, nullptr);
  k::norm_weight_grad_reduce(f32(partials) + blocks * cols, blocks, cols, bf(db), true, nullptr);
  const auto hx = bf16_to_host(x.data(), n), hw = bf16_to_host(w.data(), cols), hb = bf16_to_host(b.data(), cols);
  const auto hdy = bf16_to_host(dy.data(), n);
  std::vector<double> ry(n), rdx(n), rdw(dw0), rdb(db0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0, mg = 0, mgx = 0;
    for (std::int64_t c = 0; c < cols; ++c) mu += hx[r * cols + c] / cols;
    for (std::int64_t c = 0; c < cols; ++c) var += (hx[r * cols + c] - mu) * (hx[r * cols + c] - mu) / cols;
    const double rs = 1 / std::sqrt(var + 1e-5);
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (hx[r * cols + c] - mu) * rs, g = hdy[r * cols + c] * hw[c];
      ry[r * cols + c] = xhat * hw[c] + hb[c];
      mg += g / cols;
      mgx += g * xhat / cols;
      rdw[c] += hdy[r * cols + c] * xhat;
      rdb[c] += hdy[r * cols + c];
    }
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (hx[r * cols + c] - mu) * rs;
      rdx[r * cols + c] = rs * (hdy[r * cols + c] * hw[c] - mg - xhat * mgx);
    }
  }
  EXPECT_LT(report("layernorm_forward y", relative_error(bf16_to_host(y.data(), n), ry)), kBf16Tolerance);
  EXPECT_LT(report("layernorm_backward dx", relative_error(bf16_to_host(dx.data(), n), rdx)), kBf16Tolerance);
  EXPECT_LT(report("layernorm weight grad (+=)", relative_error(bf16_to_host(dw.data(), cols), rdw)), kBf16Tolerance);
  EXPECT_LT(report("layernorm bias grad (+=)", relative_error(bf16_to_host(db.data(), cols), rdb)), kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, KernelNorm,
                         ::testing::Values(std::pair<std::int64_t, std::int64_t>{7, 33}, std::pair<std::int64_t, std::int64_t>{300, 1000},
                                           std::pair<std::int64_t, std::int64_t>{64, 4096},
                                           std::pair<std::int64_t, std::int64_t>{600, 1032},
                                           std::pair<std::int64_t, std::int64_t>{530, 5120},
                                           std::pair<std::int64_t, std::int64_t>{9, 8192},
                                           std::pair<std::int64_t, std::int64_t>{3, 12288},
                                           // head-wide rows (norm_narrow.cu): many rows per lane group, a width of
                                           // 12 of 16 lanes, one lane group per warp, and fewer rows than blocks
                                           std::pair<std::int64_t, std::int64_t>{20000, 128},
                                           std::pair<std::int64_t, std::int64_t>{1001, 96},
                                           std::pair<std::int64_t, std::int64_t>{333, 256},
                                           std::pair<std::int64_t, std::int64_t>{70, 64}));

TEST(KernelRope, RotateHalfOnStridedQkAndInverse) {
  REQUIRE_GPU();
  for (int head_dim : {20, 64, 128}) {  // 20: the scalar kernel (half not a multiple of 8)
    const std::int64_t seq = 37, tokens = 2 * seq;
    const int q_heads = 4, kv_heads = 2;
    const std::int64_t stride = (q_heads + 2 * kv_heads) * head_dim;  // fused q | k | v rows
    auto qkv = random_bf16(tokens * stride);
    const auto before = bf16_to_host(qkv.data(), tokens * stride);
    auto table = poisoned(seq * head_dim / 2 * 8);
    k::rope_build_table(static_cast<float2*>(table.data()), seq, head_dim, 10000.f, nullptr);
    k::RopeShape shape{tokens, seq, q_heads, kv_heads, head_dim, stride, stride};
    B* q = bf(qkv);
    B* kp = q + q_heads * head_dim;
    k::rope_forward(q, kp, static_cast<float2*>(table.data()), shape, nullptr);
    std::vector<double> ref(before);
    const int half = head_dim / 2;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int h = 0; h < q_heads + kv_heads; ++h)
        for (int i = 0; i < half; ++i) {
          const double angle = double(t % seq) * std::pow(10000.0, -2.0 * i / head_dim);
          const std::int64_t at = t * stride + h * head_dim + i;
          ref[at] = before[at] * std::cos(angle) - before[at + half] * std::sin(angle);
          ref[at + half] = before[at + half] * std::cos(angle) + before[at] * std::sin(angle);
        }
    EXPECT_LT(report(head_dim == 64 ? "rope_forward d=64" : head_dim == 128 ? "rope_forward d=128" : "rope_forward d=20",
                     relative_error(bf16_to_host(qkv.data(), tokens * stride), ref)), kBf16Tolerance);
    // v (untouched) is part of the comparison above; backward is the inverse rotation.
    k::rope_backward(q, kp, static_cast<float2*>(table.data()), shape, nullptr);
    EXPECT_LT(report("rope_backward(rope_forward(x)) vs x", relative_error(bf16_to_host(qkv.data(), tokens * stride), before)),
              kBf16Tolerance);
  }
}

TEST(KernelActivation, SwiGluGeluAndResidual) {
  REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{3, 7}, {129, 1000}, {64, 4096}}) {
    const std::size_t n = rows * cols;
    auto in = random_bf16(2 * n, 3.0), dout = random_bf16(n), out = poisoned(2 * n), din = poisoned(4 * n);
    k::swiglu_forward(bf(in), bf(out), rows, cols, nullptr);
    k::swiglu_backward(bf(in), bf(dout), bf(din), rows, cols, nullptr);
    const auto hin = bf16_to_host(in.data(), 2 * n), hd = bf16_to_host(dout.data(), n);
    std::vector<double> rout(n), rdin(2 * n);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const double g = hin[r * 2 * cols + c], u = hin[r * 2 * cols + cols + c], s = 1 / (1 + std::exp(-g));
        rout[r * cols + c] = g * s * u;
        rdin[r * 2 * cols + c] = hd[r * cols + c] * u * s * (1 + g * (1 - s));
        rdin[r * 2 * cols + cols + c] = hd[r * cols + c] * g * s;
      }
    EXPECT_LT(report("swiglu_forward", relative_error(bf16_to_host(out.data(), n), rout)), kBf16Tolerance);
    EXPECT_LT(report("swiglu_backward", relative_error(bf16_to_host(din.data(), 2 * n), rdin)), kBf16Tolerance);

    auto x = random_bf16(n, 3.0), y = poisoned(2 * n), dx = poisoned(2 * n);
    k::gelu_forward(bf(x), bf(y), n, nullptr);
    k::gelu_backward(bf(x), bf(dout), bf(dx), n, nullptr);
    const auto hx = bf16_to_host(x.data(), n);
    std::vector<double> ry(n), rdx(n);
    const double a = std::sqrt(2 / M_PI);
    for (std::size_t i = 0; i < n; ++i) {
      const double v = hx[i], t = std::tanh(a * (v + 0.044715 * v * v * v));
      ry[i] = 0.5 * v * (1 + t);
      rdx[i] = hd[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * a * (1 + 3 * 0.044715 * v * v));
    }
    EXPECT_LT(report("gelu_forward", relative_error(bf16_to_host(y.data(), n), ry)), kBf16Tolerance);
    EXPECT_LT(report("gelu_backward", relative_error(bf16_to_host(dx.data(), n), rdx)), kBf16Tolerance);

    auto sum = poisoned(2 * n);
    k::residual_add(bf(x), bf(dout), bf(sum), n, nullptr);
    std::vector<double> rsum(n);
    for (std::size_t i = 0; i < n; ++i) rsum[i] = hx[i] + hd[i];
    EXPECT_LT(report("residual_add", relative_error(bf16_to_host(sum.data(), n), rsum)), kBf16Tolerance);
  }
}

TEST(KernelEmbedding, VocabShardGatherAndDeterministicScatterAdd) {
  REQUIRE_GPU();
  for (const std::int64_t hidden : {65, 1024}) {  // the scalar and the eight-wide kernels
    SCOPED_TRACE(hidden);
    const std::int64_t vocab = 1000, start = 300, shard = 400, count = 517;
    std::vector<std::int32_t> tokens(count);
    for (std::int64_t i = 0; i < count; ++i) tokens[i] = static_cast<std::int32_t>((i * 7919 + next_seed()) % vocab);
    tokens[5] = tokens[9] = tokens[100] = 301;  // repeats inside the shard
    auto dtokens = upload(tokens);
    auto table = random_bf16(shard * hidden), out = poisoned(count * hidden * 2), dy = random_bf16(count * hidden);
    auto grad = random_bf16(shard * hidden);
    const auto grad0 = bf16_to_host(grad.data(), shard * hidden);
    gpu::DeviceBuffer grad_copy(shard * hidden * 2);
    TWIN_CUDA_CHECK(cudaMemcpy(grad_copy.data(), grad.data(), shard * hidden * 2, cudaMemcpyDeviceToDevice));
    k::embedding_forward(i32(dtokens), bf(table), bf(out), count, hidden, start, shard, nullptr);
    const std::size_t ws_bytes = k::embedding_backward_workspace_bytes(count);
    gpu::DeviceBuffer workspace(ws_bytes);
    k::embedding_backward(i32(dtokens), bf(dy), bf(grad), workspace.data(), ws_bytes, count, hidden, start, shard, nullptr);
    const auto ht = bf16_to_host(table.data(), shard * hidden), hdy = bf16_to_host(dy.data(), count * hidden);
    std::vector<double> rout(count * hidden, 0.0), rgrad(grad0);
    for (std::int64_t t = 0; t < count; ++t) {
      const std::int64_t row = tokens[t] - start;
      if (row < 0 || row >= shard) continue;
      for (std::int64_t c = 0; c < hidden; ++c) {
        rout[t * hidden + c] = ht[row * hidden + c];
        rgrad[row * hidden + c] += hdy[t * hidden + c];
      }
    }
    EXPECT_EQ(report("embedding_forward", relative_error(bf16_to_host(out.data(), count * hidden), rout)), 0.0);
    const auto got = bf16_to_host(grad.data(), shard * hidden);
    EXPECT_LT(report("embedding_backward (+=)", relative_error(got, rgrad)), kBf16Tolerance);
    std::vector<bool> named(shard, false);
    for (std::int64_t t = 0; t < count; ++t)
      if (tokens[t] >= start && tokens[t] < start + shard) named[tokens[t] - start] = true;
    for (std::int64_t row = 0; row < shard; ++row)  // rows no token names: untouched, bit for bit
      if (!named[row])
        for (std::int64_t c = 0; c < hidden; ++c) ASSERT_EQ(got[row * hidden + c], grad0[row * hidden + c]);
    // Deterministic: the same call on a copy of the same gradient gives the same bits.
    k::embedding_backward(i32(dtokens), bf(dy), bf(grad_copy), workspace.data(), ws_bytes, count, hidden, start, shard,
                          nullptr);
    EXPECT_EQ(bf16_to_host(grad_copy.data(), shard * hidden), got);
  }
}

// (rows, vocab, first shard's width): odd widths take the scalar kernels, multiples of eight the vector ones.
struct CrossEntropyShape {
  std::int64_t rows, vocab, split;
};
class KernelCrossEntropy : public ::testing::TestWithParam<CrossEntropyShape> {};

TEST_P(KernelCrossEntropy, TwoShardsMatchOneShardAndReference) {
  REQUIRE_GPU();
  const auto [rows, vocab, split] = GetParam();
  auto logits = random_bf16(rows * vocab, 8.0);
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>((r * 131 + 7) % vocab);
  auto dtargets = upload(targets);
  const auto hl = bf16_to_host(logits.data(), rows * vocab);
  std::vector<double> rloss(rows), rgrad(rows * vocab);
  const double scale = 1.0 / rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (std::int64_t v = 0; v < vocab; ++v) m = std::max(m, hl[r * vocab + v]);
    for (std::int64_t v = 0; v < vocab; ++v) s += std::exp(hl[r * vocab + v] - m);
    rloss[r] = std::log(s) + m - hl[r * vocab + targets[r]];
    for (std::int64_t v = 0; v < vocab; ++v)
      rgrad[r * vocab + v] = (std::exp(hl[r * vocab + v] - m) / s - (v == targets[r])) * scale;
  }
  // One shard: the statistics are the global ones.
  {
    auto max = poisoned(rows * 4), sum = poisoned(rows * 4), target = poisoned(rows * 4), loss = poisoned(rows * 4);
    k::cross_entropy_local_stats(bf(logits), i32(dtargets), f32(max), f32(sum), f32(target), rows, vocab, 0, 0.f, nullptr);
    k::cross_entropy_loss(f32(max), f32(sum), f32(target), f32(loss), rows, nullptr);
    EXPECT_LT(report("cross_entropy loss (1 shard)", relative_error(f32_to_host(loss.data(), rows), rloss)), 1e-5);
  }
  // Two shards, merged as the executor does over TP.
  const ShardedCrossEntropy sharded =
      two_shard_cross_entropy(logits, dtargets, rows, vocab, split, static_cast<float>(scale), 0.f);
  EXPECT_LT(report("cross_entropy loss (2 shards)", relative_error(sharded.loss, rloss)), 1e-5);
  EXPECT_LT(report("cross_entropy_backward (2 shards)", relative_error(sharded.grad, rgrad)), kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, KernelCrossEntropy,
                         ::testing::Values(CrossEntropyShape{45, 1001, 384}, CrossEntropyShape{64, 32000, 16000},
                                           CrossEntropyShape{17, 4104, 2048}));

}  // namespace
}  // namespace twin::test

namespace twin::test {
namespace {

// A rectangle between two row-major buffers, exactly (bf16 copied, not converted): 16-byte loads where strides,
// width and pointers allow, element by element where not (an odd column offset, a width of 5); the rest of the
// destination untouched.
TEST(KernelCopyRows, RectanglesExactlyAndNothingElse) {
  REQUIRE_GPU();
  struct Case {
    std::int64_t rows, cols, src_ld, dst_ld, src_at, dst_at;
  };
  for (const Case& c : {Case{37, 64, 128, 96, 16, 8}, Case{5, 5, 13, 7, 3, 1}, Case{1, 4096, 4096, 4096, 0, 0}}) {
    const std::int64_t src_count = c.src_at + c.rows * c.src_ld, dst_count = c.dst_at + c.rows * c.dst_ld;
    const gpu::DeviceBuffer src = random_bf16(static_cast<std::size_t>(src_count));
    const gpu::DeviceBuffer dst = random_bf16(static_cast<std::size_t>(dst_count));
    const std::vector<double> before = bf16_to_host(dst.data(), dst_count), from = bf16_to_host(src.data(), src_count);
    kernels::copy_bf16_rows(bf(dst) + c.dst_at, c.dst_ld, bf(src) + c.src_at, c.src_ld, c.rows, c.cols, nullptr);
    TWIN_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> expected = before;
    for (std::int64_t r = 0; r < c.rows; ++r)
      for (std::int64_t k = 0; k < c.cols; ++k) expected[c.dst_at + r * c.dst_ld + k] = from[c.src_at + r * c.src_ld + k];
    EXPECT_EQ(bf16_to_host(dst.data(), dst_count), expected) << c.rows << "x" << c.cols;
  }
}

}  // namespace
}  // namespace twin::test
