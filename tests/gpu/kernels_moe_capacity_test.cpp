// An expert capacity's layout (gpu/kernels/moe_dispatch.cu moe_capacity_layout) against a CPU reference of
// Megatron's drop policy "probs" (each expert's copies by weight, largest first, ties to the lower copy; the first
// `capacity` kept), padded or not; then dispatch, combine and the combine's backward over that layout: padding rows
// are zeros, dropped copies take no part, every output poisoned first.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpu/kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

struct CapacityCase {
  std::int64_t tokens = 0;
  int experts = 0, top_k = 0;
  std::int64_t cols = 0;
  double factor = 1;
  bool pad = false;
};

// A routing skewed toward expert 0 (so that it overflows its capacity), with distinct experts per token and
// weights in (0, 1], a few of them tied (every 7th copy's weight is 0.5).
struct CapacityRouting {
  std::vector<std::int32_t> index;
  std::vector<float> weight;
};
CapacityRouting capacity_routing(const CapacityCase& c) {
  CapacityRouting r;
  std::uint64_t z = next_seed();
  const auto draw = [&z] {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(z >> 40) / (1 << 24);
  };
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    std::vector<int> experts(c.experts);
    std::iota(experts.begin(), experts.end(), 0);
    // Expert 0 first for most tokens, the rest shuffled.
    for (int i = c.experts - 1; i > 0; --i) std::swap(experts[i], experts[static_cast<int>(draw() * (i + 1))]);
    if (draw() < 0.8) std::swap(experts[0], *std::find(experts.begin(), experts.end(), 0));
    for (int j = 0; j < c.top_k; ++j) {
      r.index.push_back(experts[j]);
      const std::size_t f = r.weight.size();
      r.weight.push_back(f % 7 == 3 ? 0.5f : static_cast<float>(1e-3 + draw()));
    }
  }
  return r;
}

// Megatron's get_capacity over the copies, at most the tokens (a larger one drops nothing).
std::int64_t capacity_of(const CapacityCase& c) {
  const double copies = static_cast<double>(c.tokens * c.top_k);
  return std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(copies / c.experts * c.factor)), c.tokens);
}

struct CapacityLayoutRef {
  std::vector<std::int32_t> order, routed_row, kept;
};
CapacityLayoutRef reference_capacity_layout(const CapacityCase& c, const CapacityRouting& r, std::int64_t capacity) {
  CapacityLayoutRef out;
  out.routed_row.assign(r.index.size(), -1);
  for (int e = 0; e < c.experts; ++e) {
    std::vector<std::int32_t> copies;
    for (std::size_t f = 0; f < r.index.size(); ++f)
      if (r.index[f] == e) copies.push_back(static_cast<std::int32_t>(f));
    std::stable_sort(copies.begin(), copies.end(), [&](int a, int b) { return r.weight[a] > r.weight[b]; });
    const std::int64_t kept = std::min<std::int64_t>(copies.size(), capacity);
    for (std::int64_t i = 0; i < (c.pad ? capacity : kept); ++i) {
      if (i < kept) out.routed_row[copies[i]] = static_cast<std::int32_t>(out.order.size());
      out.order.push_back(i < kept ? copies[i] : -1);
    }
    out.kept.push_back(static_cast<std::int32_t>(c.pad ? capacity : kept));
  }
  return out;
}

std::vector<std::int32_t> int32s_on_host(const gpu::DeviceBuffer& device, std::size_t count) {
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::int32_t> out(count);
  TWIN_CUDA_CHECK(cudaMemcpy(out.data(), device.data(), count * 4, cudaMemcpyDeviceToHost));
  return out;
}

class KernelMoeCapacity : public ::testing::TestWithParam<CapacityCase> {};

TEST_P(KernelMoeCapacity, KeepsEachExpertsHeaviestCopiesAndPads) {
  REQUIRE_GPU();
  const CapacityCase c = GetParam();
  const CapacityRouting r = capacity_routing(c);
  const std::int64_t routed = c.tokens * c.top_k, capacity = capacity_of(c);
  const CapacityLayoutRef ref = reference_capacity_layout(c, r, capacity);
  const auto rows = static_cast<std::int64_t>(ref.order.size());
  ASSERT_LT(std::count(ref.routed_row.begin(), ref.routed_row.end(), -1), routed);
  if (c.factor <= 1) ASSERT_GT(std::count(ref.routed_row.begin(), ref.routed_row.end(), -1), 0) << "nothing dropped";

  auto index = upload(r.index), weight = upload(r.weight);
  auto order = poisoned(rows * 4), routed_row = poisoned(routed * 4);
  const std::size_t workspace_bytes = k::moe_capacity_workspace_bytes(routed, c.experts);
  gpu::DeviceBuffer workspace(workspace_bytes);
  k::moe_capacity_layout(i32(index), f32(weight), routed, c.experts, capacity, c.pad, i32(order), rows,
                         i32(routed_row), workspace.data(), workspace_bytes, nullptr);
  EXPECT_EQ(int32s_on_host(order, rows), ref.order);
  EXPECT_EQ(int32s_on_host(routed_row, routed), ref.routed_row);

  // Dispatch over the layout: kept copies are their tokens' rows, padding rows zeros.
  auto x = random_bf16(c.tokens * c.cols), permuted = poisoned(rows * c.cols * 2);
  k::moe_permute(bf(x), i32(order), c.top_k, bf(permuted), rows, c.cols, nullptr);
  const auto hx = bf16_to_host(x.data(), c.tokens * c.cols);
  std::vector<double> rperm(rows * c.cols, 0.0);
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t col = 0; col < c.cols && ref.order[row] >= 0; ++col)
      rperm[row * c.cols + col] = hx[ref.order[row] / c.top_k * c.cols + col];
  EXPECT_EQ(report("moe_permute under a capacity", relative_error(bf16_to_host(permuted.data(), rows * c.cols), rperm)),
            0.0);

  // Combine: each token sums its kept copies only; its backward writes zeros in padding rows and the kept copies'
  // weight gradients (the dropped copies' stay as the caller zeroed them).
  auto expert_out = random_bf16(rows * c.cols), combined = poisoned(c.tokens * c.cols * 2);
  k::moe_unpermute(bf(expert_out), i32(routed_row), f32(weight), nullptr, bf(combined), c.tokens, c.top_k, c.cols,
                   nullptr);
  auto d_out = random_bf16(c.tokens * c.cols), d_in = poisoned(rows * c.cols * 2);
  gpu::DeviceBuffer d_weight(routed * 4);
  TWIN_CUDA_CHECK(cudaMemset(d_weight.data(), 0, routed * 4));
  k::moe_unpermute_backward(bf(d_out), bf(expert_out), i32(order), i32(routed_row), f32(weight), bf(d_in),
                            f32(d_weight), rows, c.top_k, c.cols, nullptr);
  const auto hy = bf16_to_host(expert_out.data(), rows * c.cols), hg = bf16_to_host(d_out.data(), c.tokens * c.cols);
  std::vector<double> rcomb(c.tokens * c.cols, 0.0), rd_in(rows * c.cols, 0.0), rd_weight(routed, 0.0);
  for (std::int64_t f = 0; f < routed; ++f) {
    const std::int64_t row = ref.routed_row[f], t = f / c.top_k;
    for (std::int64_t col = 0; col < c.cols && row >= 0; ++col) {
      rcomb[t * c.cols + col] += r.weight[f] * hy[row * c.cols + col];
      rd_in[row * c.cols + col] = r.weight[f] * hg[t * c.cols + col];
      rd_weight[f] += hg[t * c.cols + col] * hy[row * c.cols + col];
    }
  }
  EXPECT_LT(report("moe_unpermute under a capacity",
                   relative_error(bf16_to_host(combined.data(), c.tokens * c.cols), rcomb)),
            kBf16Tolerance);
  EXPECT_LT(report("moe_unpermute_backward d_in under a capacity",
                   relative_error(bf16_to_host(d_in.data(), rows * c.cols), rd_in)),
            kBf16Tolerance);
  const auto got_weight = f32_to_host(d_weight.data(), routed);
  EXPECT_LT(report("moe_unpermute_backward d_weight under a capacity", relative_error(got_weight, rd_weight)),
            kF32Tolerance);
  for (std::int64_t f = 0; f < routed; ++f)
    if (ref.routed_row[f] < 0) EXPECT_EQ(got_weight[f], 0.0) << "dropped copy " << f;
}

INSTANTIATE_TEST_SUITE_P(Cases, KernelMoeCapacity,
                         ::testing::Values(CapacityCase{37, 8, 2, 72, 1.0, false}, CapacityCase{37, 8, 2, 72, 1.0, true},
                                           CapacityCase{300, 64, 4, 64, 1.25, false},
                                           CapacityCase{300, 64, 4, 64, 1.25, true},
                                           CapacityCase{97, 16, 8, 104, 0.5, true},
                                           CapacityCase{45, 4, 1, 100, 3.0, true}));

}  // namespace
}  // namespace twin::test
