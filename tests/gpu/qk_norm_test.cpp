// QK-norm as the executor runs it (executor/gpu/qk_norm.hpp): the query and key heads of fused QKV rows normalised
// in place through one launch of the norm entry, each by its own weight, against a float64 reference; the values
// untouched; the backward in place on the QKV gradient from the saved heads, with both weights' gradients stored and
// accumulated.
#include <cmath>

#include "executor/gpu/qk_norm.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

struct Reference {
  std::vector<double> y, dx, weight_grad;  // y, dx: [tokens, qkv_width]; weight_grad [2, d]
};

// Row (t, head) of the query (head < heads) and key heads: its weight row and first element.
Reference reference(const exec::QkNormShape& s, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& dy) {
  Reference r{x, dy, std::vector<double>(2 * s.head_dim, 0.0)};
  for (std::int64_t t = 0; t < s.tokens; ++t)
    for (std::int64_t head = 0; head < s.heads + s.groups; ++head) {
      const std::int64_t at = t * s.qkv_width + head * s.head_dim, d = s.head_dim;
      const double* weight = &w[(head < s.heads ? 0 : 1) * d];
      double* grad = &r.weight_grad[(head < s.heads ? 0 : 1) * d];
      double ss = 0, dot = 0;
      for (std::int64_t c = 0; c < d; ++c) ss += x[at + c] * x[at + c];
      const double rs = 1 / std::sqrt(ss / d + 1e-5);
      for (std::int64_t c = 0; c < d; ++c) dot += dy[at + c] * weight[c] * x[at + c];
      for (std::int64_t c = 0; c < d; ++c) {
        r.y[at + c] = x[at + c] * rs * weight[c];
        r.dx[at + c] = rs * dy[at + c] * weight[c] - x[at + c] * rs * rs * rs * dot / d;
        grad[c] += dy[at + c] * x[at + c] * rs;
      }
    }
  return r;
}

// The value columns of every row: the norm must leave them as they were.
std::vector<double> values(const exec::QkNormShape& s, const std::vector<double>& rows) {
  std::vector<double> out;
  for (std::int64_t t = 0; t < s.tokens; ++t)
    for (std::int64_t c = s.saved_width(); c < s.qkv_width; ++c) out.push_back(rows[t * s.qkv_width + c]);
  return out;
}
std::vector<double> heads_only(const exec::QkNormShape& s, std::vector<double> rows) {
  for (std::int64_t t = 0; t < s.tokens; ++t)
    for (std::int64_t c = s.saved_width(); c < s.qkv_width; ++c) rows[t * s.qkv_width + c] = 0;
  return rows;
}

class QkNorm : public ::testing::TestWithParam<exec::QkNormShape> {};

TEST_P(QkNorm, HeadsNormalisedInPlaceAndTheirGradients) {
  REQUIRE_GPU();
  const exec::QkNormShape s = GetParam();
  const std::size_t n = s.tokens * s.qkv_width;
  auto qkv = random_bf16(n, 3.0), w = random_bf16(2 * s.head_dim), d_qkv = random_bf16(n);
  auto saved = poisoned(s.tokens * s.saved_width() * 2), rstd = poisoned(s.rows() * 4);
  auto partials = poisoned(exec::qk_norm_partial_floats(s) * 4);
  auto stored = poisoned(2 * s.head_dim * 2), summed = random_bf16(2 * s.head_dim);
  const auto hx = bf16_to_host(qkv.data(), n), hw = bf16_to_host(w.data(), 2 * s.head_dim);
  const auto hdy = bf16_to_host(d_qkv.data(), n), summed0 = bf16_to_host(summed.data(), 2 * s.head_dim);
  exec::save_query_and_key(bf(qkv), bf(saved), s, nullptr);
  gpu::launch(exec::qk_norm_forward_call(bf(qkv), bf(w), f32(rstd), s), nullptr);
  // The backward twice from the same gradient: once storing the weights' gradients, once adding to earlier ones.
  auto d_qkv_again = random_bf16(n);
  TWIN_CUDA_CHECK(cudaMemcpy(d_qkv_again.data(), d_qkv.data(), n * 2, cudaMemcpyDeviceToDevice));
  gpu::launch(exec::qk_norm_backward_call(bf(d_qkv), bf(saved), bf(w), f32(rstd), f32(partials), bf(stored), false, s),
              nullptr);
  gpu::launch(
      exec::qk_norm_backward_call(bf(d_qkv_again), bf(saved), bf(w), f32(rstd), f32(partials), bf(summed), true, s),
      nullptr);
  const Reference r = reference(s, hx, hw, hdy);
  const auto y = bf16_to_host(qkv.data(), n), dx = bf16_to_host(d_qkv.data(), n);
  EXPECT_LT(report("qk_norm forward heads", relative_error(heads_only(s, y), heads_only(s, r.y))), kBf16Tolerance);
  EXPECT_EQ(values(s, y), values(s, hx)) << "the values are not the norm's";
  EXPECT_LT(report("qk_norm backward heads", relative_error(heads_only(s, dx), heads_only(s, r.dx))), kBf16Tolerance);
  EXPECT_EQ(values(s, dx), values(s, hdy)) << "the values' gradient is not the norm's";
  EXPECT_EQ(bf16_to_host(d_qkv_again.data(), n), dx) << "accumulating changes the weights' gradients only";
  EXPECT_LT(report("qk_norm weight grads (=)", relative_error(bf16_to_host(stored.data(), 2 * s.head_dim),
                                                             r.weight_grad)),
            kBf16Tolerance);
  std::vector<double> sum(r.weight_grad);
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += summed0[i];
  EXPECT_LT(report("qk_norm weight grads (+=)", relative_error(bf16_to_host(summed.data(), 2 * s.head_dim), sum)),
            kBf16Tolerance);
}

// Qwen3's head_dim 128 (many rows per backward block), a 64-wide head, a QKV row wider than the heads (a
// TP-sharded or padded row: the stride is not the heads' width), Qwen3-30B-A3B's heads over 4096 tokens (every lane
// group of the backward loads four rows at a time, several times over), and a head of 60 (rows not 16-byte
// aligned: the scalar kernels with both weights).
INSTANTIATE_TEST_SUITE_P(Shapes, QkNorm,
                         ::testing::Values(exec::QkNormShape{300, 8, 2, 128, (8 + 2 * 2) * 128},
                                           exec::QkNormShape{4096, 32, 4, 128, (32 + 2 * 4) * 128},
                                           exec::QkNormShape{50, 3, 1, 60, (3 + 2 * 1) * 60},
                                           exec::QkNormShape{37, 4, 4, 64, (4 + 2 * 4) * 64},
                                           exec::QkNormShape{19, 2, 1, 128, (2 + 2 * 1) * 128 + 64}));

}  // namespace
}  // namespace twin::test
