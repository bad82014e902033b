// GPT's kernels against float64 CPU references on fresh random inputs, outputs poisoned or random first: the linear
// bias add and its gradient (column sums, stored and accumulated), learned position embeddings (forward add, backward
// sum per position over runs with a phase and a period), and the LayerNorm backward entry with a skip gradient
// (gpu/op_kernels.hpp: the residual stream's gradient added after the kernel). Tolerance: kBf16Tolerance (1e-2
// relative, outputs stored in bf16); the gradients' bits are checked equal over two calls (no atomics).
#include <algorithm>

#include "gpu/kernels.hpp"
#include "gpu/op_kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

// (rows, cols): odd and wide shapes, rows fewer and more than the 264 partial blocks.
class KernelBias : public ::testing::TestWithParam<std::pair<std::int64_t, std::int64_t>> {};

TEST_P(KernelBias, AddAndColumnSumGradientStoredAndAccumulated) {
  REQUIRE_GPU();
  const auto [rows, cols] = GetParam();
  const std::int64_t n = rows * cols;
  auto y = random_bf16(n), bias = random_bf16(cols), dy = random_bf16(n);
  auto stored = poisoned(cols * 2), added = random_bf16(cols), again = poisoned(cols * 2);
  auto partials = poisoned(k::norm_partial_floats(rows, cols) * 4);
  const auto y0 = bf16_to_host(y.data(), n), hb = bf16_to_host(bias.data(), cols);
  const auto hdy = bf16_to_host(dy.data(), n), added0 = bf16_to_host(added.data(), cols);
  k::bias_add(bf(y), bf(bias), rows, cols, nullptr);
  k::bias_grad(bf(dy), f32(partials), bf(stored), false, rows, cols, nullptr);
  k::bias_grad(bf(dy), f32(partials), bf(added), true, rows, cols, nullptr);
  k::bias_grad(bf(dy), f32(partials), bf(again), false, rows, cols, nullptr);
  std::vector<double> ry(n), rsum(cols, 0.0), radded(added0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      ry[r * cols + c] = y0[r * cols + c] + hb[c];
      rsum[c] += hdy[r * cols + c];
    }
  for (std::int64_t c = 0; c < cols; ++c) radded[c] += rsum[c];
  EXPECT_LT(report("bias_add", relative_error(bf16_to_host(y.data(), n), ry)), kBf16Tolerance);
  const auto got = bf16_to_host(stored.data(), cols);
  EXPECT_LT(report("bias_grad", relative_error(got, rsum)), kBf16Tolerance);
  EXPECT_LT(report("bias_grad (+=)", relative_error(bf16_to_host(added.data(), cols), radded)), kBf16Tolerance);
  EXPECT_EQ(bf16_to_host(again.data(), cols), got);  // deterministic
}

INSTANTIATE_TEST_SUITE_P(Shapes, KernelBias,
                         ::testing::Values(std::pair<std::int64_t, std::int64_t>{7, 33},
                                           std::pair<std::int64_t, std::int64_t>{1000, 1024},
                                           std::pair<std::int64_t, std::int64_t>{2048, 3 * 1024 + 8}));

// Three runs over 40 rows of a table of 50 positions: a whole sequence of 16 twice (period 16), a run starting
// mid-sequence (phase 5, positions from 20), and a run shorter than its period: the backward sums every row at a
// position, and rows outside the runs neither read nor write.
TEST(KernelPositions, ForwardAddAndBackwardSumPerPosition) {
  REQUIRE_GPU();
  const std::int64_t rows = 60, positions = 50;
  const std::vector<k::PositionRun> runs = {{0, 32, 16, 0, 0}, {32, 19, 12, 5, 20}, {51, 6, 30, 2, 10}};
  for (const std::int64_t cols : {33, 256}) {
    SCOPED_TRACE(cols);
    auto x = random_bf16(rows * cols), table = random_bf16(positions * cols), dy = random_bf16(rows * cols);
    auto grad = random_bf16(positions * cols);
    gpu::DeviceBuffer copy(positions * cols * 2);
    TWIN_CUDA_CHECK(cudaMemcpy(copy.data(), grad.data(), positions * cols * 2, cudaMemcpyDeviceToDevice));
    const auto x0 = bf16_to_host(x.data(), rows * cols), ht = bf16_to_host(table.data(), positions * cols);
    const auto hdy = bf16_to_host(dy.data(), rows * cols), grad0 = bf16_to_host(grad.data(), positions * cols);
    std::vector<double> rx(x0), rgrad(grad0);
    for (const k::PositionRun& run : runs) {
      k::position_embedding_forward(bf(x), bf(table), run, cols, nullptr);
      k::position_embedding_backward(bf(dy), bf(grad), run, cols, nullptr);
      for (std::int64_t i = 0; i < run.rows; ++i) {
        const std::int64_t row = run.first_row + i, pos = run.first_position + (run.phase + i) % run.period;
        for (std::int64_t c = 0; c < cols; ++c) {
          rx[row * cols + c] += ht[pos * cols + c];
          rgrad[pos * cols + c] += hdy[row * cols + c];
        }
      }
    }
    const auto got_x = bf16_to_host(x.data(), rows * cols);
    EXPECT_LT(report("position_embedding_forward", relative_error(got_x, rx)), kBf16Tolerance);
    for (std::int64_t i = 57 * cols; i < rows * cols; ++i) ASSERT_EQ(got_x[i], x0[i]);  // rows no run names
    const auto got = bf16_to_host(grad.data(), positions * cols);
    EXPECT_LT(report("position_embedding_backward (+=)", relative_error(got, rgrad)), kBf16Tolerance);
    for (const k::PositionRun& run : runs) k::position_embedding_backward(bf(dy), bf(copy), run, cols, nullptr);
    EXPECT_EQ(bf16_to_host(copy.data(), positions * cols), got);  // deterministic
  }
}

// The embedding entry with positions adds them after the gather; its backward zeroes the positions' gradient first
// (`starts_position_gradient`, apart from the table's `starts_gradient`: with a tied table the output projection
// starts the table's gradient, never the positions') and sums only the rows of its runs.
TEST(KernelPositions, EmbeddingEntryAddsPositionsAndStartsTheirGradient) {
  REQUIRE_GPU();
  const std::int64_t count = 24, hidden = 64, vocab = 100, positions = 16;
  std::vector<std::int32_t> tokens(count);
  for (std::int64_t i = 0; i < count; ++i) tokens[i] = static_cast<std::int32_t>((i * 37 + 11) % vocab);
  auto dtokens = upload(tokens);
  auto table = random_bf16(vocab * hidden), pos = random_bf16(positions * hidden), out = poisoned(count * hidden * 2);
  auto dy = random_bf16(count * hidden), grad = random_bf16(vocab * hidden), pos_grad = random_bf16(positions * hidden);
  const std::vector<k::PositionRun> runs = {{0, 16, 8, 0, 0}, {16, 4, 8, 0, 8}};  // rows 20..23: no positions
  gpu::launch(gpu::EmbeddingForward{i32(dtokens), bf(table), bf(out), count, hidden, 0, vocab, bf(pos), runs.data(), 2},
              nullptr);
  const std::size_t ws_bytes = k::embedding_backward_workspace_bytes(count);
  gpu::DeviceBuffer workspace(ws_bytes);
  gpu::EmbeddingBackward back{i32(dtokens), bf(dy), bf(grad), workspace.data(), ws_bytes, true, count, hidden, 0, vocab};
  back.position_grad = bf(pos_grad);
  back.starts_position_gradient = true;
  back.position_dy = bf(dy);
  back.position_rows = positions;
  back.position_runs = runs.data();
  back.position_run_count = 2;
  gpu::launch(back, nullptr);
  const auto ht = bf16_to_host(table.data(), vocab * hidden), hp = bf16_to_host(pos.data(), positions * hidden);
  const auto hdy = bf16_to_host(dy.data(), count * hidden);
  std::vector<double> rout(count * hidden), rpos(positions * hidden, 0.0);
  for (std::int64_t t = 0; t < count; ++t)
    for (std::int64_t c = 0; c < hidden; ++c) {
      const std::int64_t p = t < 16 ? t % 8 : t < 20 ? 8 + (t - 16) : -1;
      rout[t * hidden + c] = ht[tokens[t] * hidden + c] + (p >= 0 ? hp[p * hidden + c] : 0.0);
      if (p >= 0) rpos[p * hidden + c] += hdy[t * hidden + c];
    }
  EXPECT_LT(report("embedding entry + positions", relative_error(bf16_to_host(out.data(), count * hidden), rout)),
            kBf16Tolerance);
  EXPECT_LT(report("embedding entry positions' grad", relative_error(bf16_to_host(pos_grad.data(), positions * hidden),
                                                                     rpos)),
            kBf16Tolerance);
}

// LayerNorm backward through the kernel entry with a skip gradient: dx = LayerNorm's input gradient + skip.
TEST(KernelNormEntry, LayerNormBackwardAddsTheSkipGradient) {
  REQUIRE_GPU();
  const std::int64_t rows = 300, cols = 1024, n = rows * cols;
  auto x = random_bf16(n), w = random_bf16(cols), b = random_bf16(cols), dy = random_bf16(n), skip = random_bf16(n);
  auto mean = poisoned(rows * 4), rstd = poisoned(rows * 4), y = poisoned(n * 2);
  auto dx_plain = poisoned(n * 2), dx_skip = poisoned(n * 2), grads = poisoned(2 * cols * 2);
  auto partials = poisoned(2 * k::norm_partial_floats(rows, cols) * 4);
  k::layernorm_forward(bf(x), bf(w), bf(b), bf(y), f32(mean), f32(rstd), rows, cols, 1e-5f, nullptr);
  gpu::NormBackward call{Normalization::layernorm, bf(dy), bf(x), bf(w), f32(mean), f32(rstd), nullptr, bf(dx_plain),
                         f32(partials), bf(grads), bf(grads) + cols, false, rows, cols};
  gpu::launch(call, nullptr);
  call.skip = bf(skip);
  call.dx = bf(dx_skip);
  gpu::launch(call, nullptr);
  const auto plain = bf16_to_host(dx_plain.data(), n), hs = bf16_to_host(skip.data(), n);
  std::vector<double> expected(n);
  for (std::int64_t i = 0; i < n; ++i) expected[i] = plain[i] + hs[i];
  EXPECT_LT(report("layernorm_backward + skip", relative_error(bf16_to_host(dx_skip.data(), n), expected)),
            kBf16Tolerance);
}

}  // namespace
}  // namespace twin::test
