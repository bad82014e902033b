// The kernels of the architectures of 2025-26 that twin execute runs beside Llama's: GeGLU (Gemma's gated GeLU,
// tanh approximation: Hugging Face's gelu_pytorch_tanh), squared ReLU (Nemotron-4) and the soft-capped final logits
// of Gemma-2 (cap x tanh(logits / cap)) in the loss, each against a float64 CPU reference with its outputs poisoned
// first; and the activation entry (gpu/op_kernels.hpp) running the kernel of each activation it names.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "gpu/kernels.hpp"
#include "gpu/op_kernels.hpp"
#include "tests/gpu/cross_entropy_shards.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

double gelu_tanh(double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }
double gelu_tanh_derivative(double v) {
  const double a = std::sqrt(2 / M_PI), t = std::tanh(a * (v + 0.044715 * v * v * v));
  return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * a * (1 + 3 * 0.044715 * v * v);
}

// (rows, cols): odd widths take the scalar kernels, multiples of eight the 16-byte ones.
constexpr std::pair<std::int64_t, std::int64_t> kShapes[] = {{3, 7}, {129, 1000}, {64, 4096}};

TEST(KernelArchitectures, GegluForwardAndBackward) {
  REQUIRE_GPU();
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE(cols);
    const std::size_t n = rows * cols;
    auto in = random_bf16(2 * n, 3.0), dout = random_bf16(n), out = poisoned(2 * n), din = poisoned(4 * n);
    k::geglu_forward(bf(in), bf(out), rows, cols, nullptr);
    k::geglu_backward(bf(in), bf(dout), bf(din), rows, cols, nullptr);
    const auto hin = bf16_to_host(in.data(), 2 * n), hd = bf16_to_host(dout.data(), n);
    std::vector<double> rout(n), rdin(2 * n);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const double g = hin[r * 2 * cols + c], u = hin[r * 2 * cols + cols + c], d = hd[r * cols + c];
        rout[r * cols + c] = gelu_tanh(g) * u;
        rdin[r * 2 * cols + c] = d * u * gelu_tanh_derivative(g);
        rdin[r * 2 * cols + cols + c] = d * gelu_tanh(g);
      }
    EXPECT_LT(report("geglu_forward", relative_error(bf16_to_host(out.data(), n), rout)), kBf16Tolerance);
    EXPECT_LT(report("geglu_backward", relative_error(bf16_to_host(din.data(), 2 * n), rdin)), kBf16Tolerance);
  }
}

TEST(KernelArchitectures, SquaredReluForwardAndBackward) {
  REQUIRE_GPU();
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE(cols);
    const std::size_t n = rows * cols;
    auto x = random_bf16(n, 3.0), dy = random_bf16(n), y = poisoned(2 * n), dx = poisoned(2 * n);
    k::squared_relu_forward(bf(x), bf(y), n, nullptr);
    k::squared_relu_backward(bf(x), bf(dy), bf(dx), n, nullptr);
    const auto hx = bf16_to_host(x.data(), n), hd = bf16_to_host(dy.data(), n);
    std::vector<double> ry(n), rdx(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double relu = std::max(hx[i], 0.0);
      ry[i] = relu * relu;
      rdx[i] = 2 * relu * hd[i];
    }
    EXPECT_LT(report("squared_relu_forward", relative_error(bf16_to_host(y.data(), n), ry)), kBf16Tolerance);
    EXPECT_LT(report("squared_relu_backward", relative_error(bf16_to_host(dx.data(), n), rdx)), kBf16Tolerance);
  }
}

// The entry runs the kernel of the activation it names, bit for bit, in both directions: a wrong dispatch
// (GeGLU run as SwiGLU, squared ReLU as GeLU, quick GeGLU without the model's terms) fails here.
TEST(KernelArchitectures, ActivationEntryRunsTheNamedKernel) {
  REQUIRE_GPU();
  const std::int64_t rows = 64, cols = 1024, n = rows * cols;
  auto in = random_bf16(2 * n, 3.0), dout = random_bf16(n);
  using Direct = void (*)(const gpu::DeviceBuffer&, const gpu::DeviceBuffer&, const gpu::DeviceBuffer&,
                          const gpu::DeviceBuffer&);
  const std::pair<Activation, Direct> cases[] = {
      {Activation::swiglu,
       [](const gpu::DeviceBuffer& i, const gpu::DeviceBuffer& d, const gpu::DeviceBuffer& o,
          const gpu::DeviceBuffer& g) {
         k::swiglu_forward(bf(i), bf(o), 64, 1024, nullptr);
         k::swiglu_backward(bf(i), bf(d), bf(g), 64, 1024, nullptr);
       }},
      {Activation::geglu,
       [](const gpu::DeviceBuffer& i, const gpu::DeviceBuffer& d, const gpu::DeviceBuffer& o,
          const gpu::DeviceBuffer& g) {
         k::geglu_forward(bf(i), bf(o), 64, 1024, nullptr);
         k::geglu_backward(bf(i), bf(d), bf(g), 64, 1024, nullptr);
       }},
      {Activation::quick_geglu,
       [](const gpu::DeviceBuffer& i, const gpu::DeviceBuffer& d, const gpu::DeviceBuffer& o,
          const gpu::DeviceBuffer& g) {
         k::quick_geglu_forward(bf(i), bf(o), 64, 1024, {1, 7}, nullptr);
         k::quick_geglu_backward(bf(i), bf(d), bf(g), 64, 1024, {1, 7}, nullptr);
       }},
      {Activation::gelu,
       [](const gpu::DeviceBuffer& i, const gpu::DeviceBuffer& d, const gpu::DeviceBuffer& o,
          const gpu::DeviceBuffer& g) {
         k::gelu_forward(bf(i), bf(o), 64 * 1024, nullptr);
         k::gelu_backward(bf(i), bf(d), bf(g), 64 * 1024, nullptr);
       }},
      {Activation::squared_relu,
       [](const gpu::DeviceBuffer& i, const gpu::DeviceBuffer& d, const gpu::DeviceBuffer& o,
          const gpu::DeviceBuffer& g) {
         k::squared_relu_forward(bf(i), bf(o), 64 * 1024, nullptr);
         k::squared_relu_backward(bf(i), bf(d), bf(g), 64 * 1024, nullptr);
       }},
  };
  for (const auto& [activation, direct] : cases) {
    SCOPED_TRACE(to_string(activation));
    const std::int64_t width = (is_gated(activation) ? 2 : 1) * n;
    auto out = poisoned(2 * n), din = poisoned(2 * width), want_out = poisoned(2 * n), want_din = poisoned(2 * width);
    const k::GluTerms glu = gpu::glu_terms(1, 7);  // gpt-oss's, which only quick GeGLU reads
    gpu::launch(gpu::ActivationForward{activation, bf(in), bf(out), rows, cols, glu}, nullptr);
    gpu::launch(gpu::ActivationBackward{activation, bf(in), bf(dout), bf(din), rows, cols, glu}, nullptr);
    direct(in, dout, want_out, want_din);
    EXPECT_EQ(bf16_to_host(out.data(), n), bf16_to_host(want_out.data(), n));
    EXPECT_EQ(bf16_to_host(din.data(), width), bf16_to_host(want_din.data(), width));
  }
}

// (rows, vocab, first shard's width, cap): the loss and the logits' gradient through the cap, on one shard and on
// two (the statistics merged as the executor merges them over TP, the all-reduces done on the host).
struct CappedShape {
  std::int64_t rows, vocab, split;
  float cap;
};
class KernelSoftcappedLoss : public ::testing::TestWithParam<CappedShape> {};

TEST_P(KernelSoftcappedLoss, OneAndTwoShardsMatchReference) {
  REQUIRE_GPU();
  const auto [rows, vocab, split, cap] = GetParam();
  auto logits = random_bf16(rows * vocab, 8.0);  // beyond the cap: the tanh bends them
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>((r * 131 + 7) % vocab);
  auto dtargets = upload(targets);
  const auto hl = bf16_to_host(logits.data(), rows * vocab);
  std::vector<double> rloss(rows), rgrad(rows * vocab);
  const double scale = 1.0 / rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> y(vocab);
    double m = -INFINITY, s = 0;
    for (std::int64_t v = 0; v < vocab; ++v) m = std::max(m, y[v] = cap * std::tanh(hl[r * vocab + v] / cap));
    for (std::int64_t v = 0; v < vocab; ++v) s += std::exp(y[v] - m);
    rloss[r] = std::log(s) + m - y[targets[r]];
    for (std::int64_t v = 0; v < vocab; ++v) {
      const double t = y[v] / cap;
      rgrad[r * vocab + v] = (std::exp(y[v] - m) / s - (v == targets[r])) * scale * (1 - t * t);
    }
  }
  {
    auto max = poisoned(rows * 4), sum = poisoned(rows * 4), target = poisoned(rows * 4), loss = poisoned(rows * 4);
    auto copy = poisoned(rows * vocab * 2);
    TWIN_CUDA_CHECK(cudaMemcpy(copy.data(), logits.data(), rows * vocab * 2, cudaMemcpyDeviceToDevice));
    k::cross_entropy_local_stats(bf(copy), i32(dtargets), f32(max), f32(sum), f32(target), rows, vocab, 0, cap,
                                 nullptr);
    k::cross_entropy_loss(f32(max), f32(sum), f32(target), f32(loss), rows, nullptr);
    EXPECT_LT(report("capped cross_entropy loss (1 shard)", relative_error(f32_to_host(loss.data(), rows), rloss)),
              1e-5);
    k::cross_entropy_backward(bf(copy), f32(max), f32(sum), i32(dtargets), bf(copy), rows, vocab, 0,
                              static_cast<float>(scale), cap, nullptr);  // in place, as the executor runs it
    EXPECT_LT(report("capped cross_entropy_backward (1 shard)",
                     relative_error(bf16_to_host(copy.data(), rows * vocab), rgrad)),
              kBf16Tolerance);
  }
  const ShardedCrossEntropy sharded =
      two_shard_cross_entropy(logits, dtargets, rows, vocab, split, static_cast<float>(scale), cap);
  EXPECT_LT(report("capped cross_entropy loss (2 shards)", relative_error(sharded.loss, rloss)), 1e-5);
  EXPECT_LT(report("capped cross_entropy_backward (2 shards)", relative_error(sharded.grad, rgrad)), kBf16Tolerance);
}

// Caps of 5 (most logits bent) and Gemma-2's 30; scalar and 16-byte kernels.
INSTANTIATE_TEST_SUITE_P(Shapes, KernelSoftcappedLoss,
                         ::testing::Values(CappedShape{45, 1001, 384, 5.f}, CappedShape{64, 32000, 16000, 30.f},
                                           CappedShape{17, 4104, 2048, 5.f}));

}  // namespace
}  // namespace twin::test
