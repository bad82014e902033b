// The cross-entropy without fusion (core/unfused_loss.hpp: Megatron-LM's passes over an fp32 copy of the logits)
// through the loss entry the executor and calibration launch (gpu/op_kernels.hpp, LossForward::fp32_logits and
// LossBackward::fp32_softmax): the loss per row, its sum, the kept softmax and the bf16 gradient against a float64
// reference, odd and even vocabularies; and the fused kernels' loss on the same logits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "gpu/kernels.hpp"
#include "gpu/op_kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

struct Shape {
  std::int64_t rows, vocab;
};
class UnfusedCrossEntropy : public ::testing::TestWithParam<Shape> {};

TEST_P(UnfusedCrossEntropy, LossSoftmaxAndGradientMatchFloat64) {
  REQUIRE_GPU();
  const auto [rows, vocab] = GetParam();
  const std::int64_t n = rows * vocab;
  auto logits = random_bf16(n, 8.0);
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>((r * 131 + 7) % vocab);
  auto dtargets = upload(targets);
  const double scale = 1.0 / rows;
  const auto hl = bf16_to_host(logits.data(), n);
  std::vector<double> rloss(rows), rsoftmax(n), rgrad(n);
  double rsum = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (std::int64_t v = 0; v < vocab; ++v) m = std::max(m, hl[r * vocab + v]);
    for (std::int64_t v = 0; v < vocab; ++v) s += std::exp(hl[r * vocab + v] - m);
    rloss[r] = std::log(s) + m - hl[r * vocab + targets[r]];
    rsum += rloss[r];
    for (std::int64_t v = 0; v < vocab; ++v) {
      rsoftmax[r * vocab + v] = std::exp(hl[r * vocab + v] - m) / s;
      rgrad[r * vocab + v] = (rsoftmax[r * vocab + v] - (v == targets[r])) * scale;
    }
  }
  auto fp32 = poisoned(n * 4), max = poisoned(rows * 4), sum = poisoned(rows * 4), target = poisoned(rows * 4);
  auto loss = poisoned(rows * 4), loss_sum = gpu::DeviceBuffer(4), dlogits = poisoned(n * 2);
  TWIN_CUDA_CHECK(cudaMemset(loss_sum.data(), 0, 4));
  gpu::LossForward forward{bf(logits), i32(dtargets), f32(max), f32(sum), f32(target), f32(loss), f32(loss_sum),
                           rows, vocab, 0, 0.f};
  forward.fp32_logits = f32(fp32);
  gpu::launch(forward, nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  const auto softmax = f32_to_host(fp32.data(), n);
  gpu::LossBackward backward{nullptr, nullptr, nullptr, i32(dtargets), bf(dlogits), static_cast<float>(scale), rows,
                             vocab, 0, 0.f};
  backward.fp32_softmax = f32(fp32);
  gpu::launch(backward, nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  char name[64];
  std::snprintf(name, sizeof name, "rows %lld vocab %lld", (long long)rows, (long long)vocab);
  EXPECT_LT(report("unfused cross-entropy loss", relative_error(f32_to_host(loss.data(), rows), rloss)), 1e-5) << name;
  EXPECT_LT(report("unfused cross-entropy loss sum", relative_error(f32_to_host(loss_sum.data(), 1), {rsum})), 1e-5)
      << name;
  EXPECT_LT(report("unfused cross-entropy softmax", relative_error(softmax, rsoftmax)), 1e-5) << name;
  EXPECT_LT(report("unfused cross-entropy gradient", relative_error(bf16_to_host(dlogits.data(), n), rgrad)),
            kBf16Tolerance)
      << name;
  // The fused kernels on the same logits: the same loss.
  auto fused_loss = poisoned(rows * 4);
  k::cross_entropy_local_stats(bf(logits), i32(dtargets), f32(max), f32(sum), f32(target), rows, vocab, 0, 0.f, nullptr);
  k::cross_entropy_loss(f32(max), f32(sum), f32(target), f32(fused_loss), rows, nullptr);
  EXPECT_LT(relative_error(f32_to_host(loss.data(), rows), f32_to_host(fused_loss.data(), rows)), 1e-5) << name;
}

INSTANTIATE_TEST_SUITE_P(Shapes, UnfusedCrossEntropy,
                         ::testing::Values(Shape{45, 1001}, Shape{64, 32000}, Shape{17, 50257}, Shape{8, 8}));

}  // namespace
}  // namespace twin::test
