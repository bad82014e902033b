// fp32 main gradients (framework.main_grad_dtype float32, Megatron's main_grad): every kernel that writes or reads a
// weight's gradient, into or from an fp32 buffer, against a float64 reference: the weight-gradient GEMM storing and
// adding fp32 C (with the bias-gradient epilogue where cuBLASLt has it), the norms' and biases' reduction, the
// embedding's and learned positions' scatter-adds, a gradient written apart added in, the gradient norm and AdamW.
// The sums are fp32 end to end, so each is held to the fp32 tolerance, not bf16's.
#include <cmath>
#include <cstdio>
#include <vector>

#include "gpu/kernels.hpp"
#include "gpu/grouped_matmul.hpp"
#include "gpu/matmul.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

// Weight-gradient layouts: [out, in] = dY^T X (transpose_a), with and without the bias-gradient epilogue.
TEST(MainGradientFp32, WeightGradientGemmStoresAndAddsFp32) {
  REQUIRE_GPU();
  const std::int64_t m = 256, n = 384, k = 512;  // op(A) [m, k] = A^T with A stored [k, m]
  auto a = random_bf16(k * m), b = random_bf16(k * n), start = random_f32(m * n);
  auto stored = poisoned(m * n * 4), bias = poisoned(m * 4);
  const auto ha = bf16_to_host(a.data(), k * m), hb = bf16_to_host(b.data(), k * n);
  const auto hstart = f32_to_host(start.data(), m * n);
  exec::Matmul matmul;
  exec::MatmulProblem problem{m, n, k, true, false, false};
  problem.f32_output = true;
  matmul.run(problem, bf(a), bf(b), f32(stored), nullptr);
  problem.accumulate = true;
  matmul.run(problem, bf(a), bf(b), f32(start), nullptr);
  std::vector<double> product(m * n, 0.0), row_sums(m, 0.0);
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t i = 0; i < m; ++i) {
      row_sums[i] += ha[p * m + i];
      for (std::int64_t j = 0; j < n; ++j) product[i * n + j] += ha[p * m + i] * hb[p * n + j];
    }
  std::vector<double> accumulated(hstart);
  for (std::int64_t i = 0; i < m * n; ++i) accumulated[i] += product[i];
  EXPECT_LT(report("fp32 C = A^T B", relative_error(f32_to_host(stored.data(), m * n), product)), kF32Tolerance);
  EXPECT_LT(report("fp32 C += A^T B", relative_error(f32_to_host(start.data(), m * n), accumulated)), kF32Tolerance);
  exec::MatmulProblem fused{m, n, k, true, false, false, 1, exec::MatmulEpilogue::bias_grad_of_a};
  fused.f32_output = true;
  if (!matmul.supports(fused)) {
    std::printf("[kernel-error] fp32 bias-gradient epilogue: no cuBLASLt algorithm (the kernels run instead)\n");
    return;
  }
  auto with_bias = poisoned(m * n * 4);
  matmul.run(fused, bf(a), bf(b), f32(with_bias), nullptr, f32(bias));
  EXPECT_LT(report("fp32 C = A^T B, bias gradient", relative_error(f32_to_host(bias.data(), m), row_sums)),
            kF32Tolerance);
  EXPECT_LT(relative_error(f32_to_host(with_bias.data(), m * n), product), kF32Tolerance);
}

// The experts' weight gradients into fp32 (gpu/grouped_matmul.hpp with an fp32 output): dW_e [in, out] = x_e^T dy_e
// and db_e = the column sums of dy_e, stored then added, an expert without tokens and one with a single row among
// them; through cuBLASLt's epilogue where it has one, else the bias kernels.
TEST(MainGradientFp32, ExpertsWeightGradientsIntoFp32) {
  REQUIRE_GPU();
  const std::int64_t in = 64, out = 96;
  const std::vector<std::int64_t> counts = {5, 0, 1, 37};
  std::int64_t rows = 0;
  for (std::int64_t c : counts) rows += c;
  const auto experts = static_cast<std::int64_t>(counts.size());
  auto x = random_bf16(rows * in), dy = random_bf16(rows * out);
  auto grads = random_f32(experts * in * out), bias = random_f32(experts * out);
  auto partials = poisoned(k::norm_partial_floats(rows, out) * 4);
  const auto hx = bf16_to_host(x.data(), rows * in), hdy = bf16_to_host(dy.data(), rows * out);
  std::vector<double> rgrads(experts * in * out, 0.0), rbias(experts * out, 0.0);
  std::vector<exec::GemmGroup> groups;
  std::int64_t first = 0;
  for (std::int64_t e = 0; e < experts; ++e) {
    groups.push_back({in, out, counts[e], bf(x) + first * in, bf(dy) + first * out, f32(grads) + e * in * out,
                      f32(bias) + e * out});
    for (std::int64_t r = first; r < first + counts[e]; ++r)
      for (std::int64_t j = 0; j < out; ++j) {
        rbias[e * out + j] += hdy[r * out + j];
        for (std::int64_t i = 0; i < in; ++i) rgrads[(e * in + i) * out + j] += hx[r * in + i] * hdy[r * out + j];
      }
    first += counts[e];
  }
  exec::GroupedMatmul grouped;
  const exec::GroupEpilogue epilogue{exec::MatmulEpilogue::bias_grad_of_b, f32(partials)};
  grouped.run(groups, true, false, false, nullptr, epilogue, k::GradType::f32);  // stored
  EXPECT_LT(report("fp32 experts' dW", relative_error(f32_to_host(grads.data(), experts * in * out), rgrads)),
            kF32Tolerance);
  EXPECT_LT(report("fp32 experts' db", relative_error(f32_to_host(bias.data(), experts * out), rbias)), kF32Tolerance);
  std::vector<double> twice(rgrads);
  for (double& g : twice) g *= 2;
  grouped.run(groups, true, false, true, nullptr, {}, k::GradType::f32);  // added (no epilogue: the bias stays)
  EXPECT_LT(report("fp32 experts' dW (+=)", relative_error(f32_to_host(grads.data(), experts * in * out), twice)),
            kF32Tolerance);
  EXPECT_THROW(grouped.run(groups, false, false, false, nullptr, {exec::MatmulEpilogue::add_bias, nullptr},
                           k::GradType::f32),
               std::invalid_argument);
}

TEST(MainGradientFp32, NormAndBiasReductionsStoreAndAdd) {
  REQUIRE_GPU();
  const std::int64_t rows = 3000, cols = 1000;
  auto dy = random_bf16(rows * cols), partials = poisoned(k::norm_partial_floats(rows, cols) * 4);
  auto stored = poisoned(cols * 4), added = random_f32(cols);
  const auto hdy = bf16_to_host(dy.data(), rows * cols), added0 = f32_to_host(added.data(), cols);
  k::bias_grad(bf(dy), f32(partials), f32(stored), false, rows, cols, nullptr);
  k::bias_grad(bf(dy), f32(partials), f32(added), true, rows, cols, nullptr);
  std::vector<double> sums(cols, 0.0), sums_added(added0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) sums[c] += hdy[r * cols + c];
  for (std::int64_t c = 0; c < cols; ++c) sums_added[c] += sums[c];
  EXPECT_LT(report("fp32 bias_grad", relative_error(f32_to_host(stored.data(), cols), sums)), kF32Tolerance);
  EXPECT_LT(report("fp32 bias_grad (+=)", relative_error(f32_to_host(added.data(), cols), sums_added)), kF32Tolerance);
}

TEST(MainGradientFp32, EmbeddingAndPositionsScatterAddIntoFp32) {
  REQUIRE_GPU();
  for (const std::int64_t hidden : {65, 1024}) {  // the scalar and the eight-wide embedding kernels
    SCOPED_TRACE(hidden);
    const std::int64_t vocab_rows = 400, start = 300, count = 517, positions = 64;
    std::vector<std::int32_t> tokens(count);
    for (std::int64_t i = 0; i < count; ++i) tokens[i] = static_cast<std::int32_t>((i * 7919 + next_seed()) % 1000);
    tokens[5] = tokens[9] = tokens[100] = 301;  // repeats inside the shard
    auto dtokens = upload(tokens);
    auto dy = random_bf16(count * hidden), grad = random_f32(vocab_rows * hidden);
    auto position_grad = random_f32(positions * hidden);
    const auto hdy = bf16_to_host(dy.data(), count * hidden);
    std::vector<double> rgrad = f32_to_host(grad.data(), vocab_rows * hidden);
    std::vector<double> rpos = f32_to_host(position_grad.data(), positions * hidden);
    const std::size_t ws_bytes = k::embedding_backward_workspace_bytes(count);
    gpu::DeviceBuffer workspace(ws_bytes);
    k::embedding_backward(i32(dtokens), bf(dy), f32(grad), workspace.data(), ws_bytes, count, hidden, start, vocab_rows,
                          nullptr);
    const k::PositionRun run{0, count, positions, 3, 0};  // rows at positions (3 + i) % 64
    k::position_embedding_backward(bf(dy), f32(position_grad), run, hidden, nullptr);
    for (std::int64_t t = 0; t < count; ++t) {
      const std::int64_t row = tokens[t] - start;
      for (std::int64_t c = 0; c < hidden; ++c) {
        if (row >= 0 && row < vocab_rows) rgrad[row * hidden + c] += hdy[t * hidden + c];
        rpos[((3 + t) % positions) * hidden + c] += hdy[t * hidden + c];
      }
    }
    EXPECT_LT(report("fp32 embedding_backward (+=)",
                     relative_error(f32_to_host(grad.data(), vocab_rows * hidden), rgrad)),
              kF32Tolerance);
    EXPECT_LT(report("fp32 position_backward (+=)",
                     relative_error(f32_to_host(position_grad.data(), positions * hidden), rpos)),
              kF32Tolerance);
  }
}

TEST(MainGradientFp32, GradientApartAddedIn) {
  REQUIRE_GPU();
  for (const std::int64_t n : {std::int64_t{100003}, std::int64_t{100000}}) {  // the scalar and eight-wide kernels
    SCOPED_TRACE(n);
    auto x = random_bf16(n), main = random_f32(n), main_bf16 = random_bf16(n), sum = poisoned(n * 2);
    const auto hx = bf16_to_host(x.data(), n);
    std::vector<double> ref = f32_to_host(main.data(), n);
    for (std::int64_t i = 0; i < n; ++i) ref[i] += hx[i];
    k::add_to_gradient(bf(x), f32(main), n, nullptr);
    EXPECT_LT(report("add_to_gradient fp32", relative_error(f32_to_host(main.data(), n), ref)), 1e-7);
    // Into bf16: the residual add's bits (the path before fp32 main gradients).
    k::residual_add(bf(main_bf16), bf(x), bf(sum), n, nullptr);
    k::add_to_gradient(bf(x), bf(main_bf16), n, nullptr);
    EXPECT_EQ(bf16_to_host(main_bf16.data(), n), bf16_to_host(sum.data(), n));
  }
}

TEST(MainGradientFp32, NormOfGradientsAndAdamWReadFp32) {
  REQUIRE_GPU();
  for (const std::int64_t n : {std::int64_t{100003}, std::int64_t{100000}}) {  // scalar and vectorised AdamW
    SCOPED_TRACE(n);
    auto grad = random_f32(n + 3), master = random_f32(n), m = random_f32(n), v = random_f32(n);
    auto param = poisoned(n * 2), partials = poisoned(k::grad_norm_partial_count() * 4);
    auto sum_sq = upload(std::vector<float>{0.f});
    const float* g = f32(grad) + 1;  // an unaligned start: the norm's head, body and tail
    const auto hg = f32_to_host(g, n);
    k::grad_sum_squares(g, n, f32(partials), f32(sum_sq), nullptr);
    double ss = 0;
    for (double x : hg) ss += x * x;
    EXPECT_LT(report("fp32 grad_sum_squares", relative_error(f32_to_host(sum_sq.data(), 1), {ss})), 1e-5);
    std::vector<float> vf(n);
    const auto hv0 = f32_to_host(v.data(), n);
    for (std::int64_t i = 0; i < n; ++i) vf[i] = static_cast<float>(std::abs(hv0[i]));
    TWIN_CUDA_CHECK(cudaMemcpy(v.data(), vf.data(), n * 4, cudaMemcpyHostToDevice));
    auto hm = f32_to_host(m.data(), n), hp = f32_to_host(master.data(), n);
    std::vector<double> hv(vf.begin(), vf.end());
    k::AdamWParams p;
    p.lr = 1e-2f;
    const float* aligned_grad = n % 4 == 0 ? f32(grad) : g;  // the vector kernel wants 16-byte gradients
    const auto hga = f32_to_host(aligned_grad, n);
    k::adamw_step(k::AdamWState{f32(master), f32(m), k::StateType::f32, f32(v), k::StateType::f32}, aligned_grad,
                  bf(param), n, p, nullptr, nullptr);
    for (std::int64_t i = 0; i < n; ++i) {
      hm[i] = p.beta1 * hm[i] + (1 - p.beta1) * hga[i];
      hv[i] = p.beta2 * hv[i] + (1 - p.beta2) * hga[i] * hga[i];
      const double update = (hm[i] / (1 - p.beta1)) / (std::sqrt(hv[i] / (1 - p.beta2)) + p.eps);
      hp[i] = hp[i] * (1 - double(p.lr) * p.weight_decay) - p.lr * update;
    }
    EXPECT_LT(report("adamw, fp32 gradients", relative_error(f32_to_host(master.data(), n), hp)), 1e-5);
    EXPECT_LT(relative_error(bf16_to_host(param.data(), n), hp), kBf16Tolerance);
  }
}

}  // namespace
}  // namespace twin::test
