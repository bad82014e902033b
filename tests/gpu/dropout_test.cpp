// Hidden dropout's kernels (gpu/kernels/dropout.cu) and their entries (gpu/op_kernels.hpp's Elementwise and
// embedding entries) against float64 references. The mask is read back (cuRAND's host generator is not documented to
// lay out its Philox stream as curand_init(seed, subsequence, offset) does, so the test does not recompute it on the
// host) and checked for what it must be: bytes of 0 or 1, a keep fraction within 4 sigma of 1 - p, the same bits for
// the same key, other bits for another step, site or seed, the same bits for an element wherever its row lies
// (split into runs as SP, CP or DP split the rows), and p = 0 keeping every element. Outputs: out == residual + mask
// * x / (1 - p) and dx == dy * mask / (1 - p) within kBf16Tolerance (stored in bf16).
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "gpu/kernels.hpp"
#include "gpu/op_kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

std::vector<std::uint8_t> mask_to_host(const gpu::DeviceBuffer& mask, std::size_t count) {
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> out(count);
  TWIN_CUDA_CHECK(cudaMemcpy(out.data(), mask.data(), count, cudaMemcpyDeviceToHost));
  return out;
}

// The mask a forward over `runs` of rows x cols draws (x and out scratch).
std::vector<std::uint8_t> drawn(std::int64_t rows, std::int64_t cols, const std::vector<k::DropoutRun>& runs,
                                const k::DropoutDraw& draw) {
  const std::int64_t n = rows * cols;
  auto x = random_bf16(n), out = poisoned(n * 2), mask = poisoned(n);
  for (const k::DropoutRun& run : runs)
    k::dropout_add_forward(nullptr, bf(x), bf(out), static_cast<std::uint8_t*>(mask.data()), cols, run, draw, nullptr);
  return mask_to_host(mask, n);
}

double kept_fraction(const std::vector<std::uint8_t>& mask) {
  double kept = 0;
  for (std::uint8_t m : mask) kept += m;
  return kept / static_cast<double>(mask.size());
}

TEST(KernelDropout, ForwardAddsTheMaskedScaledBranchAndKeepsOneMinusP) {
  REQUIRE_GPU();
  const std::int64_t rows = 384, cols = 1024, n = rows * cols;
  for (const float p : {0.1f, 0.5f}) {
    SCOPED_TRACE(p);
    auto residual = random_bf16(n), x = random_bf16(n), out = poisoned(n * 2), mask = poisoned(n);
    const k::DropoutDraw draw{p, 1234, (std::uint64_t{1} << 32) | 3};
    k::dropout_add_forward(bf(residual), bf(x), bf(out), static_cast<std::uint8_t*>(mask.data()), cols,
                           {0, rows, 4096}, draw, nullptr);
    const auto m = mask_to_host(mask, n);
    const auto hr = bf16_to_host(residual.data(), n), hx = bf16_to_host(x.data(), n);
    std::vector<double> ref(n);
    bool bytes_are_bits = true;
    for (std::int64_t i = 0; i < n; ++i) {
      bytes_are_bits = bytes_are_bits && m[i] <= 1;
      ref[i] = hr[i] + m[i] * hx[i] / (1.0 - p);
    }
    EXPECT_TRUE(bytes_are_bits);
    EXPECT_LT(report("dropout_add_forward", relative_error(bf16_to_host(out.data(), n), ref)), kBf16Tolerance);
    const double sigma = std::sqrt(p * (1.0 - p) / static_cast<double>(n));
    EXPECT_NEAR(kept_fraction(m), 1.0 - p, 4 * sigma);
  }
}

TEST(KernelDropout, WithoutAResidualTheOutputIsTheMaskedScaledInputInPlace) {  // the embedding's
  REQUIRE_GPU();
  const std::int64_t rows = 100, cols = 512, n = rows * cols;
  const float p = 0.1f;
  auto x = random_bf16(n), mask = poisoned(n);
  const auto hx = bf16_to_host(x.data(), n);
  k::dropout_add_forward(nullptr, bf(x), bf(x), static_cast<std::uint8_t*>(mask.data()), cols, {0, rows, 0},
                         {p, 7, 0}, nullptr);
  const auto m = mask_to_host(mask, n);
  std::vector<double> ref(n);
  for (std::int64_t i = 0; i < n; ++i) ref[i] = m[i] * hx[i] / (1.0 - p);
  EXPECT_LT(report("dropout (no residual, in place)", relative_error(bf16_to_host(x.data(), n), ref)),
            kBf16Tolerance);
}

TEST(KernelDropout, TheSameKeyDrawsTheSameMaskAndAnotherStepSiteOrSeedAnother) {
  REQUIRE_GPU();
  const std::int64_t rows = 64, cols = 768;
  const std::vector<k::DropoutRun> all{{0, rows, 1000}};
  const float p = 0.1f;
  const auto first = drawn(rows, cols, all, {p, 42, (std::uint64_t{5} << 32) | 3});
  EXPECT_EQ(drawn(rows, cols, all, {p, 42, (std::uint64_t{5} << 32) | 3}), first);
  // Two independent masks agree on p^2 + (1-p)^2 of the elements (0.82), never on all.
  for (const k::DropoutDraw other : {k::DropoutDraw{p, 42, (std::uint64_t{6} << 32) | 3},   // the next step
                                     k::DropoutDraw{p, 42, (std::uint64_t{5} << 32) | 4},   // another site
                                     k::DropoutDraw{p, 43, (std::uint64_t{5} << 32) | 3}}) { // another seed
    const auto m = drawn(rows, cols, all, other);
    double same = 0;
    for (std::size_t i = 0; i < m.size(); ++i) same += m[i] == first[i];
    EXPECT_NEAR(same / static_cast<double>(m.size()), p * p + (1 - p) * (1 - p), 0.01);
  }
}

// The rows of one tensor split as layouts split them: two GPUs' halves (SP or DP: each its own tensor of half the
// rows, the second starting at the batch's token rows / 2), and a context-parallel order (each sequence's chunks 0
// and 3 on one GPU, 1 and 2 on the other, in that order): every element's bit is the one-tensor run's at its token.
TEST(KernelDropout, AnElementsBitIsAFunctionOfItsPlaceInTheBatchNotOfTheLayout) {
  REQUIRE_GPU();
  const std::int64_t seq = 64, sequences = 2, rows = seq * sequences, cols = 256, first_token = 3 * seq;
  const k::DropoutDraw draw{0.3f, 99, 17};
  const auto whole = drawn(rows, cols, {{0, rows, first_token}}, draw);
  const auto row_of = [&](const std::vector<std::uint8_t>& m, std::int64_t r) {
    return std::vector<std::uint8_t>(m.begin() + r * cols, m.begin() + (r + 1) * cols);
  };
  for (int half = 0; half < 2; ++half) {  // SP / DP: rows [half * rows / 2, ...) on GPU `half`
    const auto part = drawn(rows / 2, cols, {{0, rows / 2, first_token + half * rows / 2}}, draw);
    for (std::int64_t r = 0; r < rows / 2; ++r) ASSERT_EQ(row_of(part, r), row_of(whole, half * rows / 2 + r)) << r;
  }
  const std::int64_t chunk = seq / 4;
  for (int rank = 0; rank < 2; ++rank) {  // CP 2: chunks rank and 3 - rank of each sequence
    std::vector<k::DropoutRun> runs;
    for (std::int64_t s = 0; s < sequences; ++s)
      for (int half = 0; half < 2; ++half)
        runs.push_back({s * 2 * chunk + half * chunk, chunk,
                        first_token + s * seq + (half == 0 ? rank : 3 - rank) * chunk});
    const auto part = drawn(sequences * 2 * chunk, cols, runs, draw);
    for (const k::DropoutRun& run : runs)
      for (std::int64_t r = 0; r < run.rows; ++r)
        ASSERT_EQ(row_of(part, run.first_row + r), row_of(whole, run.first_token - first_token + r));
  }
}

TEST(KernelDropout, ProbabilityZeroKeepsEveryElement) {
  REQUIRE_GPU();
  const auto m = drawn(16, 1024, {{0, 16, 0}}, {0.f, 5, 1});
  EXPECT_EQ(kept_fraction(m), 1.0);
}

// The residual's entry backward: the output's gradient completed (dy + the stream's part, in place), then the
// branch's through the forward's mask; without a stream part only the branch's.
TEST(KernelDropout, ResidualEntryBackwardIsTheGradientThroughTheForwardsMask) {
  REQUIRE_GPU();
  const std::int64_t rows = 200, cols = 1024, n = rows * cols;
  const float p = 0.1f;
  auto a = random_bf16(n), b = random_bf16(n), out = poisoned(n * 2), mask = poisoned(n);
  const std::vector<k::DropoutRun> runs{{0, rows, 0}};
  gpu::Elementwise forward{bf(a), bf(b), bf(out), n, {{p, 11, 1}, static_cast<std::uint8_t*>(mask.data()),
                                                       runs.data(), 1}, cols};
  gpu::launch(forward, nullptr);
  const auto m = mask_to_host(mask, n);
  for (const bool adds : {true, false}) {
    SCOPED_TRACE(adds);
    auto dy = random_bf16(n), part = random_bf16(n), dropped = poisoned(n * 2);
    const auto hdy = bf16_to_host(dy.data(), n), hpart = bf16_to_host(part.data(), n);
    gpu::Elementwise backward{bf(dy), adds ? bf(part) : nullptr, bf(dy), n, {{p, 0, 0}, static_cast<std::uint8_t*>(
                                                                                           mask.data())}, cols,
                              bf(dropped)};
    gpu::launch(backward, nullptr);
    std::vector<double> full(n), ref(n);
    for (std::int64_t i = 0; i < n; ++i) {
      full[i] = hdy[i] + (adds ? hpart[i] : 0.0);
      ref[i] = full[i] * m[i] / (1.0 - p);
    }
    EXPECT_LT(report("residual backward (output)", relative_error(bf16_to_host(dy.data(), n), full)), kBf16Tolerance);
    EXPECT_LT(report("residual backward (branch)", relative_error(bf16_to_host(dropped.data(), n), ref)),
              kBf16Tolerance);
  }
}

TEST(KernelDropout, RefusesBadShapesAndProbabilities) {
  REQUIRE_GPU();
  auto x = random_bf16(64), mask = poisoned(64);
  auto* m = static_cast<std::uint8_t*>(mask.data());
  EXPECT_THROW(k::dropout_add_forward(nullptr, bf(x), bf(x), m, 12, {0, 4, 0}, {0.1f, 1, 0}, nullptr),
               std::invalid_argument);  // cols not a multiple of 8
  EXPECT_THROW(k::dropout_add_forward(nullptr, bf(x), bf(x), m, 8, {0, 8, 0}, {1.f, 1, 0}, nullptr),
               std::invalid_argument);  // p = 1
  EXPECT_THROW(k::dropout_backward(bf(x), m, bf(x), 60, 0.1f, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace twin::test
