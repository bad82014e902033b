// One FP8 linear's three GEMMs as the executor's FP8 linears run them (executor/gpu/fp8_linears.hpp), per recipe
// with a scale per tensor (tensorwise) and per block (blockwise, DeepSeek-V3's): X, W and dY cast by the calls the
// linears make (fp8_cast_call) into the buffers they lay out (fp8_layout), then the GEMMs they hand cuBLASLt
// (fp8_forward_gemm, fp8_data_grad_gemm, fp8_weight_grad_gemm: which copy of which tensor, which scale mode), each
// against the float64 product of the operands as the host quantizes them under the recipe; an input's rowwise copy
// lies apart and is poisoned after the forward GEMM, as the executor frees it there. The weight gradient
// accumulates onto a gradient already there, as every micro-batch after the first does. Inputs carry an outlier a
// hundred times the rest in every 128 x 128 block; the error against the float64 product of the bf16 tensors is
// reported beside, the recipe's own.
#include <cstdint>
#include <string>
#include <vector>

#include "executor/gpu/fp8_linears.hpp"
#include "tests/gpu/fp8_block_reference.hpp"

namespace twin::test {
namespace {

using kernels::Fp8Type;

constexpr std::int64_t kTokens = 256, kIn = 384, kOut = 512;

// A linear's tensor (rows x cols as stored in bf16) cast as Fp8Linears casts it where the weight gradient reads it in
// FP8, in buffers of its layout: an input's columnwise copy and records in one, its rowwise copy apart (`apart`,
// which the executor frees after the forward GEMM), an output gradient's or a weight's both copies in one.
struct CastTensor {
  exec::Fp8Layout layout;
  gpu::DeviceBuffer buffer, apart;
  exec::Fp8Copies copies;
  CastTensor(Fp8Recipe recipe, LinearTensor tensor, const gpu::DeviceBuffer& x, std::int64_t rows, std::int64_t cols)
      : layout(exec::fp8_layout(recipe, tensor, rows, cols, exec::held_as_cast(tensor, true))),
        buffer(poisoned(layout.bytes())),
        apart(poisoned(layout.held == exec::Fp8Held::columnwise ? layout.rowwise_apart_bytes() : 16)),
        copies(layout.copies_in(buffer.data(), layout.held == exec::Fp8Held::columnwise ? apart.data() : nullptr)) {
    gpu::Fp8Cast call{bf(x), rows, cols, Fp8Type::e4m3, copies.rowwise, copies.columnwise, copies.rowwise_scaling};
    call.columnwise_scaling = copies.columnwise_scaling;
    gpu::launch(exec::fp8_cast_call(recipe, tensor, call, nullptr, 0, nullptr), nullptr);
  }
};

// A copy's values (rows x cols, cols its contraction dimension) as the recipe quantizes them, back as float64: one
// scale for the tensor (the same for its transpose), or per block of the tensor's kind.
std::vector<double> dequantized(Fp8Recipe recipe, LinearTensor tensor, const std::vector<double>& v, std::int64_t rows,
                                std::int64_t cols) {
  const kernels::Fp8Scaling blocks = gpu::fp8_cast_blocks(recipe, tensor);
  if (blocks == kernels::Fp8Scaling::per_tensor) return quantize_on_host(v, Fp8Type::e4m3).dequantized();
  return quantize_blocks(v, rows, cols, blocks).dequantized;
}

// C[m,n] (+ start) = A[m,k] B[n,k]^T in float64.
std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b, std::int64_t m,
                            std::int64_t n, std::int64_t k, const std::vector<double>& start) {
  std::vector<double> c(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = start.empty() ? 0.0 : start[i * n + j];
      for (std::int64_t p = 0; p < k; ++p) sum += a[i * k + p] * b[j * k + p];
      c[i * n + j] = sum;
    }
  return c;
}

// The GEMM's bf16 product against float64 of its quantized operands (`fp8_ref`) and of the bf16 tensors (`exact`).
void expect_product(const gpu::DeviceBuffer& c, const std::vector<double>& fp8_ref, const std::vector<double>& exact,
                    const std::string& what) {
  const std::vector<double> got = bf16_to_host(c.data(), fp8_ref.size());
  // The GEMM itself: FP32 accumulation with the scales applied per tensor or per block of k, and a bf16 product
  // (relative rounding 2^-9 per element): kBf16Tolerance (1e-2) leaves several times the 2.1e-3 to 2.6e-3 measured.
  EXPECT_LT(report((what + " vs float64 of its operands").c_str(), relative_error(got, fp8_ref)), kBf16Tolerance);
  // E4M3's rounding (3 mantissa bits) of both operands: within 5% of the unquantized product, as fp8_test.cpp asks.
  EXPECT_LT(report((what + " vs float64 of bf16").c_str(), relative_error(got, exact)), 0.05);
}

class Fp8LinearTest : public ::testing::TestWithParam<Fp8Recipe> {};

TEST_P(Fp8LinearTest, ThreeGemmsMatchFloat64OfTheQuantizedOperands) {
  REQUIRE_GPU();
  const Fp8Recipe recipe = GetParam();
  const std::string name = to_string(recipe);
  const gpu::DeviceBuffer x = with_outliers(kTokens, kIn), w = with_outliers(kIn, kOut),
                          dy = with_outliers(kTokens, kOut);
  const std::vector<double> hx = bf16_to_host(x.data(), kTokens * kIn), hw = bf16_to_host(w.data(), kIn * kOut),
                            hdy = bf16_to_host(dy.data(), kTokens * kOut);
  const CastTensor cx(recipe, LinearTensor::input, x, kTokens, kIn), cw(recipe, LinearTensor::weight, w, kIn, kOut),
      cdy(recipe, LinearTensor::output_gradient, dy, kTokens, kOut);
  exec::Fp8Matmul matmul;
  const GemmShape forward{kTokens, kOut, kIn}, data_grad{kTokens, kIn, kOut}, weight_grad{kIn, kOut, kTokens};
  auto y = poisoned(kTokens * kOut * 2), dx = poisoned(kTokens * kIn * 2);
  auto dw = random_bf16(kIn * kOut);  // the gradient of the micro-batches before
  const std::vector<double> dw_before = bf16_to_host(dw.data(), kIn * kOut);
  exec::fp8_forward_gemm(recipe, forward, cx.copies, cw.copies).run(matmul, bf(y), nullptr);
  // The input's rowwise copy goes after the forward GEMM (its buffer apart, poisoned here): the backward reads none
  // of it. Its buffer holds one copy, the weight's and the output gradient's two.
  ASSERT_EQ(cx.layout.held, exec::Fp8Held::columnwise);
  ASSERT_EQ(cdy.layout.held, exec::Fp8Held::both);
  EXPECT_EQ(cx.layout.bytes() + cx.layout.rowwise_apart_bytes(),
            exec::fp8_layout(recipe, LinearTensor::input, kTokens, kIn).bytes());
  TWIN_CUDA_CHECK(cudaMemset(cx.apart.data(), 0xff, cx.layout.rowwise_apart_bytes()));
  exec::fp8_data_grad_gemm(recipe, data_grad, cdy.copies, cw.copies).run(matmul, bf(dx), nullptr);
  exec::fp8_weight_grad_gemm(recipe, weight_grad, cx.copies, cdy.copies, true).run(matmul, bf(dw), nullptr);

  const std::vector<double> ht = transpose(hw, kIn, kOut), hxt = transpose(hx, kTokens, kIn),
                            hdyt = transpose(hdy, kTokens, kOut);
  const LinearTensor in = LinearTensor::input, weight = LinearTensor::weight, grad = LinearTensor::output_gradient;
  // Forward: X rowwise [T, in] by W columnwise [out, in].
  expect_product(y,
                 product(dequantized(recipe, in, hx, kTokens, kIn), dequantized(recipe, weight, ht, kOut, kIn), kTokens,
                         kOut, kIn, {}),
                 product(hx, ht, kTokens, kOut, kIn, {}), name + " forward");
  // Data gradient: dY rowwise [T, out] by W rowwise [in, out].
  expect_product(dx,
                 product(dequantized(recipe, grad, hdy, kTokens, kOut), dequantized(recipe, weight, hw, kIn, kOut),
                         kTokens, kIn, kOut, {}),
                 product(hdy, hw, kTokens, kIn, kOut, {}), name + " data gradient");
  // Weight gradient: X columnwise [in, T] by dY columnwise [out, T], added to the gradient before.
  expect_product(dw,
                 product(dequantized(recipe, in, hxt, kIn, kTokens), dequantized(recipe, grad, hdyt, kOut, kTokens),
                         kIn, kOut, kTokens, dw_before),
                 product(hxt, hdyt, kIn, kOut, kTokens, dw_before), name + " weight gradient");
}

INSTANTIATE_TEST_SUITE_P(Recipes, Fp8LinearTest, ::testing::Values(Fp8Recipe::tensorwise, Fp8Recipe::blockwise),
                         [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace twin::test
