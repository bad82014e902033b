// gpt-oss's GLU (Megatron's quick GeGLU, gpu/kernels.hpp quick_geglu_*): out = quick_gelu(min(gate, c)) *
// (clamp(up, -c, c) + offset), quick_gelu(x) = x sigmoid(1.702 x), forward and backward against a float64 reference
// with the outputs poisoned first: gpt-oss's terms (offset 1, clamp 7) on inputs of up to +-10 so that many elements
// are clamped (and pass no gradient), and no terms at all; odd widths (the scalar kernels) and multiples of eight (the
// 16-byte ones). The reference's gradient is checked against central differences of its own value.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "gpu/kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

struct Glu {
  double offset, clamp;
  double value(double g, double u) const {
    if (clamp > 0) g = std::min(g, clamp), u = std::clamp(u, -clamp, clamp);
    return g / (1 + std::exp(-1.702 * g)) * (u + offset);
  }
  // d value / d gate and d up (0 where the input is clamped).
  std::pair<double, double> grad(double g, double u) const {
    const bool g_clamped = clamp > 0 && g > clamp, u_clamped = clamp > 0 && std::abs(u) > clamp;
    if (clamp > 0) g = std::min(g, clamp), u = std::clamp(u, -clamp, clamp);
    const double s = 1 / (1 + std::exp(-1.702 * g));
    return {g_clamped ? 0 : (u + offset) * s * (1 + 1.702 * g * (1 - s)), u_clamped ? 0 : g * s};
  }
};

TEST(KernelQuickGeglu, ReferenceGradientMatchesCentralDifferences) {
  const Glu glu{1, 7};
  const double h = 1e-6;
  for (const auto& [g, u] : {std::pair{0.3, -0.4}, {-2.5, 6.0}, {6.9, -6.9}, {9.0, 1.0}, {1.0, 9.0}, {-8.0, -8.0}}) {
    const auto [dg, du] = glu.grad(g, u);
    EXPECT_NEAR(dg, (glu.value(g + h, u) - glu.value(g - h, u)) / (2 * h), 1e-6) << g << " " << u;
    EXPECT_NEAR(du, (glu.value(g, u + h) - glu.value(g, u - h)) / (2 * h), 1e-6) << g << " " << u;
  }
}

TEST(KernelQuickGeglu, ForwardAndBackwardMatchFloat64) {
  REQUIRE_GPU();
  for (const Glu glu : {Glu{1, 7}, Glu{0, 0}})
    for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{3, 7}, {129, 1000}, {64, 2880}}) {
      SCOPED_TRACE(testing::Message() << "offset " << glu.offset << " clamp " << glu.clamp << " cols " << cols);
      const std::int64_t n = rows * cols;
      auto in = random_bf16(2 * n, 10.0), dout = random_bf16(n), out = poisoned(2 * n), din = poisoned(4 * n);
      const k::GluTerms terms{static_cast<float>(glu.offset), static_cast<float>(glu.clamp)};
      k::quick_geglu_forward(bf(in), bf(out), rows, cols, terms, nullptr);
      k::quick_geglu_backward(bf(in), bf(dout), bf(din), rows, cols, terms, nullptr);
      const auto hin = bf16_to_host(in.data(), 2 * n), hd = bf16_to_host(dout.data(), n);
      std::vector<double> rout(n), rdin(2 * n);
      std::int64_t clamped = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
          const double g = hin[r * 2 * cols + c], u = hin[r * 2 * cols + cols + c], d = hd[r * cols + c];
          rout[r * cols + c] = glu.value(g, u);
          const auto [dg, du] = glu.grad(g, u);
          rdin[r * 2 * cols + c] = d * dg;
          rdin[r * 2 * cols + cols + c] = d * du;
          clamped += glu.clamp > 0 && (g > glu.clamp || std::abs(u) > glu.clamp);
        }
      if (glu.clamp > 0) EXPECT_GT(clamped, n / 10) << "inputs that reach the clamp";
      EXPECT_LT(report("quick_geglu_forward", relative_error(bf16_to_host(out.data(), n), rout)), kBf16Tolerance);
      EXPECT_LT(report("quick_geglu_backward", relative_error(bf16_to_host(din.data(), 2 * n), rdin)),
                kBf16Tolerance);
    }
}

TEST(KernelQuickGeglu, ANegativeClampIsRefused) {
  REQUIRE_GPU();
  auto in = random_bf16(16), out = poisoned(16);
  EXPECT_THROW(k::quick_geglu_forward(bf(in), bf(out), 1, 8, {1, -1}, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace twin::test
