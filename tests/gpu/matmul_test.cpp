// The executor's cuBLASLt GEMMs (gpu/matmul.hpp) against a float64 CPU reference: the plain product, the
// accumulating one (C += A B, weight gradients over micro-batches) and the epilogue that adds another tensor
// (C = A B + R, the residual stream of a fused residual add), with every transpose the executor uses.
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

TEST(Matmul, RefusesAnAddendWithoutAccumulation) {
  REQUIRE_GPU();
  auto a = random_bf16(64 * 64), out = poisoned(64 * 64 * 2);
  exec::Matmul matmul;
  EXPECT_THROW(matmul.run({64, 64, 64, false, false, false}, bf(a), bf(a), bf(out), nullptr, bf(a)), std::logic_error);
}

}  // namespace
}  // namespace twin::test
