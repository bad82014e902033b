// The executor's cuBLASLt GEMMs (gpu/matmul.hpp) against a float64 CPU reference: the plain product, the
// accumulating one (C += A B, weight gradients over micro-batches) and the epilogue that adds another tensor
// (C = A B + R, the residual stream of a fused residual add), with every transpose the executor uses; and the
// epilogues of a biased linear (the bias added, its gradient written).
#include <cstdio>
#include <tuple>

#include "gpu/matmul.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

// Row-major reference of op(A)[m,k] op(B)[k,n], A stored [m,k] or [k,m], B [k,n] or [n,k].
std::vector<double> reference_product(const std::vector<double>& a, const std::vector<double>& b, std::int64_t m,
                                      std::int64_t n, std::int64_t k, bool transpose_a, bool transpose_b) {
  std::vector<double> c(m * n, 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) {
      const double av = transpose_a ? a[p * m + i] : a[i * k + p];
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += av * (transpose_b ? b[j * k + p] : b[p * n + j]);
    }
  return c;
}

class MatmulProducts : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(MatmulProducts, PlainAccumulatingAndWithAnAddend) {
  REQUIRE_GPU();
  const auto [transpose_a, transpose_b] = GetParam();
  const std::int64_t m = 192, n = 320, k = 448;
  auto a = random_bf16(m * k), b = random_bf16(k * n), start = random_bf16(m * n), addend = random_bf16(m * n);
  auto plain = poisoned(m * n * 2), fused = poisoned(m * n * 2);
  const auto ha = bf16_to_host(a.data(), m * k), hb = bf16_to_host(b.data(), k * n);
  const auto hstart = bf16_to_host(start.data(), m * n), haddend = bf16_to_host(addend.data(), m * n);
  exec::Matmul matmul;
  matmul.run({m, n, k, transpose_a, transpose_b, false}, bf(a), bf(b), bf(plain), nullptr);
  matmul.run({m, n, k, transpose_a, transpose_b, true}, bf(a), bf(b), bf(start), nullptr);
  matmul.run({m, n, k, transpose_a, transpose_b, true}, bf(a), bf(b), bf(fused), nullptr, bf(addend));
  const auto product = reference_product(ha, hb, m, n, k, transpose_a, transpose_b);
  std::vector<double> accumulated(product), with_addend(product);
  for (std::int64_t i = 0; i < m * n; ++i) {
    accumulated[i] += hstart[i];
    with_addend[i] += haddend[i];
  }
  EXPECT_LT(report("C = A B", relative_error(bf16_to_host(plain.data(), m * n), product)), kBf16Tolerance);
  EXPECT_LT(report("C += A B", relative_error(bf16_to_host(start.data(), m * n), accumulated)), kBf16Tolerance);
  EXPECT_LT(report("C = A B + R", relative_error(bf16_to_host(fused.data(), m * n), with_addend)), kBf16Tolerance);
  EXPECT_EQ(bf16_to_host(addend.data(), m * n), haddend) << "the addend is read, never written";
}

INSTANTIATE_TEST_SUITE_P(Transposes, MatmulProducts,
                         ::testing::Values(std::tuple{false, false}, std::tuple{false, true}, std::tuple{true, false}));

// The epilogues of a biased linear: the forward adds the bias to every row (with and without the residual addend);
// the weight-gradient GEMM writes the bias's gradient, the sums over k of the operand that holds the output's
// gradient: op(A)'s rows ([out, in] = dY^T X) or op(B)'s columns ([in, out] = X^T dY). A layout without such an
// algorithm is said (the executor then runs the separate kernels); the bias add must have one.
class MatmulEpilogues : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(MatmulEpilogues, AddTheBiasAndWriteItsGradient) {
  REQUIRE_GPU();
  const auto [transpose_a, transpose_b] = GetParam();
  const std::int64_t m = 256, n = 384, k = 320;
  auto a = random_bf16(m * k), b = random_bf16(k * n), bias = random_bf16(n), addend = random_bf16(m * n);
  auto with_bias = poisoned(m * n * 2), with_both = poisoned(m * n * 2), product = poisoned(m * n * 2);
  const auto ha = bf16_to_host(a.data(), m * k), hb = bf16_to_host(b.data(), k * n);
  const auto hbias = bf16_to_host(bias.data(), n), haddend = bf16_to_host(addend.data(), m * n);
  exec::Matmul matmul;
  using exec::MatmulEpilogue;
  const exec::MatmulProblem biased{m, n, k, transpose_a, transpose_b, false, 1, MatmulEpilogue::add_bias};
  ASSERT_TRUE(matmul.supports(biased)) << "cuBLASLt has no bias epilogue for this layout";
  matmul.run(biased, bf(a), bf(b), bf(with_bias), nullptr, nullptr, bf(bias));
  matmul.run({m, n, k, transpose_a, transpose_b, true, 1, MatmulEpilogue::add_bias}, bf(a), bf(b), bf(with_both),
             nullptr, bf(addend), bf(bias));
  const auto ref = reference_product(ha, hb, m, n, k, transpose_a, transpose_b);
  std::vector<double> ref_bias(ref), ref_both(ref);
  for (std::int64_t i = 0; i < m * n; ++i) {
    ref_bias[i] += hbias[i % n];
    ref_both[i] += hbias[i % n] + haddend[i];
  }
  EXPECT_LT(report("C = A B + bias", relative_error(bf16_to_host(with_bias.data(), m * n), ref_bias)), kBf16Tolerance);
  EXPECT_LT(report("C = A B + R + bias", relative_error(bf16_to_host(with_both.data(), m * n), ref_both)),
            kBf16Tolerance);
  // The gradients: sums of op(A) over k (length m) and of op(B) over k (length n).
  std::vector<double> sums_a(m, 0.0), sums_b(n, 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) sums_a[i] += transpose_a ? ha[p * m + i] : ha[i * k + p];
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t p = 0; p < k; ++p) sums_b[j] += transpose_b ? hb[j * k + p] : hb[p * n + j];
  for (const auto& [epilogue, length, ref_sums, name] :
       {std::tuple{MatmulEpilogue::bias_grad_of_a, m, &sums_a, "sums of op(A) over k"},
        std::tuple{MatmulEpilogue::bias_grad_of_b, n, &sums_b, "sums of op(B) over k"}}) {
    const exec::MatmulProblem problem{m, n, k, transpose_a, transpose_b, false, 1, epilogue};
    if (!matmul.supports(problem)) {
      std::printf("  %s: no cuBLASLt algorithm for transposes %d/%d (the separate kernel runs)\n", name,
                  transpose_a, transpose_b);
      continue;
    }
    auto sums = poisoned(length * 2);
    matmul.run(problem, bf(a), bf(b), bf(product), nullptr, nullptr, bf(sums));
    EXPECT_LT(report(name, relative_error(bf16_to_host(sums.data(), length), *ref_sums)), kBf16Tolerance);
    EXPECT_LT(report("  and C = A B", relative_error(bf16_to_host(product.data(), m * n), ref)), kBf16Tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Transposes, MatmulEpilogues,
                         ::testing::Values(std::tuple{false, false}, std::tuple{false, true}, std::tuple{true, false}));

TEST(Matmul, RefusesAVectorWithoutAnEpilogueAndAnEpilogueWithoutAVector) {
  REQUIRE_GPU();
  auto a = random_bf16(64 * 64), out = poisoned(64 * 64 * 2), vector = poisoned(64 * 2);
  exec::Matmul matmul;
  EXPECT_THROW(matmul.run({64, 64, 64, false, false, false}, bf(a), bf(a), bf(out), nullptr, nullptr, bf(vector)),
               std::logic_error);
  EXPECT_THROW(matmul.run({64, 64, 64, false, false, false, 1, exec::MatmulEpilogue::add_bias}, bf(a), bf(a), bf(out),
                          nullptr),
               std::logic_error);
}

TEST(Matmul, RefusesAnAddendWithoutAccumulation) {
  REQUIRE_GPU();
  auto a = random_bf16(64 * 64), out = poisoned(64 * 64 * 2);
  exec::Matmul matmul;
  EXPECT_THROW(matmul.run({64, 64, 64, false, false, false}, bf(a), bf(a), bf(out), nullptr, bf(a)), std::logic_error);
}

}  // namespace
}  // namespace twin::test
