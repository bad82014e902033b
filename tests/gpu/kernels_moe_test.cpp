// The mixture-of-experts kernels (gpu/kernels/moe.cu, moe_dispatch.cu) against float64 CPU references, every
// output poisoned first: the router's softmax and top-k, the stable sort by expert, dispatch and combine (with
// and without weights), the combine's backward, the router's backward (through the chosen weights and through
// the load-balancing loss) and that loss's value; then the forward pipeline end to end.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpu/kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

struct MoeShape {
  std::int64_t tokens = 0;
  int experts = 0, top_k = 0;
  std::int64_t cols = 0;  // width of the routed rows
};

std::vector<std::int32_t> i32_to_host(const gpu::DeviceBuffer& device, std::size_t count) {
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::int32_t> out(count);
  TWIN_CUDA_CHECK(cudaMemcpy(out.data(), device.data(), count * 4, cudaMemcpyDeviceToHost));
  return out;
}
std::vector<float> floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }
std::vector<__nv_bfloat16> bf16s(const std::vector<double>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16(static_cast<float>(v[i]));
  return out;
}

// A routing and the float64 reference of each step: probs [tokens, experts]; index, weight [routed]; order,
// routed_row [routed] (a stable CPU sort by expert); counts [experts].
struct Routing {
  std::int64_t routed = 0;
  std::vector<double> logits, probs, weight;
  std::vector<std::int32_t> index, order, routed_row, counts;
};

// bf16-exact logits skewed toward expert 0, with the last expert never chosen (zero copies) and token 0's
// experts 1 and 2 tied on top (the tie goes to expert 1).
std::vector<double> skewed_logits(const MoeShape& s) {
  std::uint64_t z = next_seed();
  std::vector<double> logits(s.tokens * s.experts);
  for (std::int64_t t = 0; t < s.tokens; ++t)
    for (int e = 0; e < s.experts; ++e) {
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      double v = static_cast<double>(z >> 40) / (1 << 24) * 4 - 2 + (e == 0 ? 1.5 : 0) - (e == s.experts - 1 ? 30 : 0);
      if (t == 0 && (e == 1 || e == 2)) v = 8;
      logits[t * s.experts + e] = __bfloat162float(__float2bfloat16(static_cast<float>(v)));
    }
  return logits;
}

Routing reference_routing(const MoeShape& s, std::vector<double> logits) {
  const int experts = s.experts, top_k = s.top_k;
  Routing r;
  r.routed = s.tokens * top_k;
  r.logits = std::move(logits);
  r.probs.resize(s.tokens * experts);
  r.weight.resize(r.routed);
  r.index.resize(r.routed);
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    const double* l = &r.logits[t * experts];
    const double m = *std::max_element(l, l + experts);
    double sum = 0, chosen = 0;
    for (int e = 0; e < experts; ++e) sum += std::exp(l[e] - m);
    for (int e = 0; e < experts; ++e) r.probs[t * experts + e] = std::exp(l[e] - m) / sum;
    std::vector<int> by_logit(experts);
    std::iota(by_logit.begin(), by_logit.end(), 0);
    std::stable_sort(by_logit.begin(), by_logit.end(), [&](int a, int b) { return l[a] > l[b]; });
    for (int j = 0; j < top_k; ++j) chosen += r.probs[t * experts + by_logit[j]];
    for (int j = 0; j < top_k; ++j) {
      r.index[t * top_k + j] = by_logit[j];
      r.weight[t * top_k + j] = r.probs[t * experts + by_logit[j]] / chosen;
    }
  }
  r.order.resize(r.routed);
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(), [&](int a, int b) { return r.index[a] < r.index[b]; });
  r.routed_row.resize(r.routed);
  for (std::int64_t row = 0; row < r.routed; ++row) r.routed_row[r.order[row]] = static_cast<std::int32_t>(row);
  r.counts.assign(experts, 0);
  for (std::int32_t e : r.index) ++r.counts[e];
  return r;
}

class KernelMoeShapes : public ::testing::TestWithParam<MoeShape> {};

TEST_P(KernelMoeShapes, RouterSoftmaxAndTopK) {
  REQUIRE_GPU();
  const MoeShape s = GetParam();
  const Routing r = reference_routing(s, skewed_logits(s));
  ASSERT_EQ(r.index[0], 1) << "token 0's tie goes to the lower expert";
  auto logits = upload(bf16s(r.logits));
  auto probs = poisoned(s.tokens * s.experts * 4), index = poisoned(r.routed * 4), weight = poisoned(r.routed * 4);
  k::moe_router_topk(bf(logits), f32(probs), i32(index), f32(weight), s.tokens, s.experts, s.top_k, {}, nullptr);
  EXPECT_EQ(i32_to_host(index, r.routed), r.index);
  EXPECT_LT(report("moe_router_topk probs", relative_error(f32_to_host(probs.data(), r.probs.size()), r.probs)),
            kF32Tolerance);
  EXPECT_LT(report("moe_router_topk weights", relative_error(f32_to_host(weight.data(), r.routed), r.weight)),
            kF32Tolerance);
}

TEST_P(KernelMoeShapes, StableSortByExpert) {
  REQUIRE_GPU();
  const MoeShape s = GetParam();
  const Routing r = reference_routing(s, skewed_logits(s));
  ASSERT_EQ(r.counts[s.experts - 1], 0) << "the routing leaves the last expert without copies";
  auto index = upload(r.index);
  auto order = poisoned(r.routed * 4), routed_row = poisoned(r.routed * 4), counts = poisoned(s.experts * 4);
  const std::size_t workspace_bytes = k::moe_sort_workspace_bytes(r.routed, s.experts);
  gpu::DeviceBuffer workspace(workspace_bytes);
  k::moe_sort_by_expert(i32(index), r.routed, s.experts, i32(order), i32(routed_row), i32(counts), workspace.data(),
                        workspace_bytes, nullptr);
  EXPECT_EQ(i32_to_host(order, r.routed), r.order);
  EXPECT_EQ(i32_to_host(routed_row, r.routed), r.routed_row);
  EXPECT_EQ(i32_to_host(counts, s.experts), r.counts);
}

TEST_P(KernelMoeShapes, DispatchAndCombine) {
  REQUIRE_GPU();
  const MoeShape s = GetParam();
  const Routing r = reference_routing(s, skewed_logits(s));
  const std::int64_t cols = s.cols, routed = r.routed;
  auto x = random_bf16(s.tokens * cols), order = upload(r.order), permuted = poisoned(routed * cols * 2);
  k::moe_permute(bf(x), i32(order), s.top_k, bf(permuted), routed, cols, nullptr);
  auto expert_out = random_bf16(routed * cols), routed_row = upload(r.routed_row), weight = upload(floats(r.weight));
  auto combined = poisoned(s.tokens * cols * 2), summed = poisoned(s.tokens * cols * 2);
  k::moe_unpermute(bf(expert_out), i32(routed_row), f32(weight), nullptr, bf(combined), s.tokens, s.top_k, cols,
                   nullptr);
  k::moe_unpermute(bf(expert_out), i32(routed_row), nullptr, nullptr, bf(summed), s.tokens, s.top_k, cols, nullptr);
  // With shared experts the combine adds the routed rows to their output, in place.
  auto with_shared = random_bf16(s.tokens * cols);
  const auto shared_out = bf16_to_host(with_shared.data(), s.tokens * cols);
  k::moe_unpermute(bf(expert_out), i32(routed_row), f32(weight), bf(with_shared), bf(with_shared), s.tokens, s.top_k,
                   cols, nullptr);

  const auto hx = bf16_to_host(x.data(), s.tokens * cols), hy = bf16_to_host(expert_out.data(), routed * cols);
  const auto hw = f32_to_host(weight.data(), routed);
  std::vector<double> rperm(routed * cols), rcomb(s.tokens * cols, 0.0), rsum(s.tokens * cols, 0.0);
  for (std::int64_t row = 0; row < routed; ++row)
    for (std::int64_t c = 0; c < cols; ++c) rperm[row * cols + c] = hx[r.order[row] / s.top_k * cols + c];
  for (std::int64_t f = 0; f < routed; ++f)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double y = hy[r.routed_row[f] * cols + c];
      rcomb[f / s.top_k * cols + c] += hw[f] * y;
      rsum[f / s.top_k * cols + c] += y;
    }
  EXPECT_EQ(report("moe_permute", relative_error(bf16_to_host(permuted.data(), routed * cols), rperm)), 0.0);
  EXPECT_LT(report("moe_unpermute weighted", relative_error(bf16_to_host(combined.data(), s.tokens * cols), rcomb)),
            kBf16Tolerance);
  EXPECT_LT(report("moe_unpermute unweighted", relative_error(bf16_to_host(summed.data(), s.tokens * cols), rsum)),
            kBf16Tolerance);
  for (std::size_t i = 0; i < rcomb.size(); ++i) rcomb[i] += shared_out[i];
  EXPECT_LT(report("moe_unpermute + shared experts",
                   relative_error(bf16_to_host(with_shared.data(), s.tokens * cols), rcomb)),
            kBf16Tolerance);
}

TEST_P(KernelMoeShapes, CombineBackward) {
  REQUIRE_GPU();
  const MoeShape s = GetParam();
  const Routing r = reference_routing(s, skewed_logits(s));
  const std::int64_t cols = s.cols, routed = r.routed;
  auto d_out = random_bf16(s.tokens * cols), expert_out = random_bf16(routed * cols);
  auto order = upload(r.order), routed_row = upload(r.routed_row), weight = upload(floats(r.weight));
  auto d_in = poisoned(routed * cols * 2), d_weight = poisoned(routed * 4), d_weight_again = poisoned(routed * 4);
  k::moe_unpermute_backward(bf(d_out), bf(expert_out), i32(order), i32(routed_row), f32(weight), bf(d_in),
                            f32(d_weight), routed, s.top_k, cols, nullptr);
  k::moe_unpermute_backward(bf(d_out), bf(expert_out), i32(order), i32(routed_row), f32(weight), bf(d_in),
                            f32(d_weight_again), routed, s.top_k, cols, nullptr);

  const auto hg = bf16_to_host(d_out.data(), s.tokens * cols), hy = bf16_to_host(expert_out.data(), routed * cols);
  const auto hw = f32_to_host(weight.data(), routed);
  std::vector<double> rd_in(routed * cols), rd_weight(routed, 0.0);
  for (std::int64_t row = 0; row < routed; ++row) {
    const std::int64_t f = r.order[row], t = f / s.top_k;
    for (std::int64_t c = 0; c < cols; ++c) {
      rd_in[row * cols + c] = hw[f] * hg[t * cols + c];
      rd_weight[f] += hg[t * cols + c] * hy[r.routed_row[f] * cols + c];
    }
  }
  const auto got_weight = f32_to_host(d_weight.data(), routed);
  EXPECT_LT(report("moe_unpermute_backward d_in", relative_error(bf16_to_host(d_in.data(), routed * cols), rd_in)),
            kBf16Tolerance);
  EXPECT_LT(report("moe_unpermute_backward d_weight", relative_error(got_weight, rd_weight)), kF32Tolerance);
  EXPECT_EQ(f32_to_host(d_weight_again.data(), routed), got_weight) << "same input, same bits";
}

// float64 d logits: the chosen weights' softmax backward plus, with aux_coeff, the load-balancing loss's.
std::vector<double> reference_router_backward(const MoeShape& s, const Routing& r, const std::vector<double>& probs,
                                              const std::vector<double>& weight, const std::vector<double>& g,
                                              double aux_coeff) {
  const int experts = s.experts, top_k = s.top_k;
  std::vector<double> d(s.tokens * experts, 0.0), a(experts);
  for (int e = 0; e < experts; ++e)
    a[e] = aux_coeff * experts * r.counts[e] / (static_cast<double>(s.tokens) * s.tokens * top_k);
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    double wg = 0, pa = 0;
    for (int j = 0; j < top_k; ++j) wg += weight[t * top_k + j] * g[t * top_k + j];
    for (int j = 0; j < top_k; ++j)
      d[t * experts + r.index[t * top_k + j]] += weight[t * top_k + j] * (g[t * top_k + j] - wg);
    for (int e = 0; e < experts; ++e) pa += probs[t * experts + e] * a[e];
    for (int e = 0; e < experts; ++e) d[t * experts + e] += probs[t * experts + e] * (a[e] - pa);
  }
  return d;
}

TEST_P(KernelMoeShapes, RouterBackward) {
  REQUIRE_GPU();
  const MoeShape s = GetParam();
  const Routing r = reference_routing(s, skewed_logits(s));
  const std::int64_t n = s.tokens * s.experts;
  auto probs = upload(floats(r.probs)), index = upload(r.index), weight = upload(floats(r.weight));
  auto counts = upload(r.counts), g = random_f32(r.routed), no_g = upload(std::vector<float>(r.routed, 0.f));
  const auto hp = f32_to_host(probs.data(), n), hw = f32_to_host(weight.data(), r.routed);
  const auto hg = f32_to_host(g.data(), r.routed);
  struct Case {
    const char* what;
    float aux_coeff;
    const gpu::DeviceBuffer* g;
  };
  for (const Case& c : {Case{"moe_router_backward both terms", 0.01f, &g}, Case{"moe_router_backward aux 0", 0.f, &g},
                        Case{"moe_router_backward aux term alone", 0.01f, &no_g}}) {
    auto d_logits = poisoned(n * 2);
    k::moe_router_backward(f32(probs), i32(index), f32(weight), f32(*c.g), i32(counts), c.aux_coeff, bf(d_logits),
                           s.tokens, s.experts, s.top_k, {}, nullptr);
    const auto got = bf16_to_host(d_logits.data(), n);
    const auto ref = reference_router_backward(s, r, hp, hw, c.g == &g ? hg : std::vector<double>(r.routed, 0.0),
                                               c.aux_coeff);
    EXPECT_LT(report(c.what, relative_error(got, ref)), kBf16Tolerance);
    if (c.aux_coeff != 0.f) continue;
    std::vector<bool> chosen(n, false);  // without the loss only the chosen experts get a gradient
    for (std::int64_t f = 0; f < r.routed; ++f) chosen[f / s.top_k * s.experts + r.index[f]] = true;
    for (std::int64_t i = 0; i < n; ++i)
      if (!chosen[i]) {
        EXPECT_EQ(got[i], 0.0) << "unchosen expert " << i % s.experts << " of token " << i / s.experts;
      }
  }
}

TEST_P(KernelMoeShapes, LoadBalancingLossValue) {
  REQUIRE_GPU();
  const MoeShape s = GetParam();
  const Routing r = reference_routing(s, skewed_logits(s));
  const float aux_coeff = 0.01f;
  auto probs = upload(floats(r.probs)), counts = upload(r.counts), aux = upload(std::vector<float>{0.f});
  k::moe_aux_loss(f32(probs), i32(counts), aux_coeff, f32(aux), s.tokens, s.experts, s.top_k, {}, nullptr);
  const double first = f32_to_host(aux.data(), 1)[0];
  k::moe_aux_loss(f32(probs), i32(counts), aux_coeff, f32(aux), s.tokens, s.experts, s.top_k, {}, nullptr);
  const double second = f32_to_host(aux.data(), 1)[0];
  const auto hp = f32_to_host(probs.data(), s.tokens * s.experts);
  double sum = 0;
  for (std::int64_t t = 0; t < s.tokens; ++t)
    for (int e = 0; e < s.experts; ++e) sum += r.counts[e] * hp[t * s.experts + e];
  const double tokens = static_cast<double>(s.tokens);
  const double ref = static_cast<double>(aux_coeff) * s.experts / (tokens * tokens * s.top_k) * sum;
  EXPECT_LT(report("moe_aux_loss", std::abs(first - ref) / ref), kF32Tolerance);
  EXPECT_EQ(second, 2 * first) << "the loss is added to *aux_sum, the same bits each time";
}

// Tokens not a multiple of 8; Mixtral's 8 experts and wider routers; top_k 1 to 4; rows of 16-byte pieces (cols
// % 8 == 0) and of single bf16 (cols 100); fine-grained experts at top-8, Qwen3-MoE's 128 and DeepSeek-V3's
// routed 64 (its shared expert is a dense MLP, not routed).
INSTANTIATE_TEST_SUITE_P(Shapes, KernelMoeShapes,
                         ::testing::Values(MoeShape{37, 8, 2, 72}, MoeShape{45, 64, 4, 100}, MoeShape{101, 40, 1, 256},
                                           MoeShape{64, 8, 4, 24}, MoeShape{300, 128, 8, 64},
                                           MoeShape{97, 64, 8, 104}));

// The forward pipeline on the GPU's own outputs: router, sort, dispatch, combine. Each token's copies are the
// token itself, so the combine returns sum_j w_j x[t].
TEST(KernelMoe, RouterTopKPermuteUnpermute) {
  REQUIRE_GPU();
  const std::int64_t tokens = 37, cols = 72;
  const int experts = 40, top_k = 3;
  const std::int64_t routed = tokens * top_k;
  auto logits = random_bf16(tokens * experts, 4.0), x = random_bf16(tokens * cols);
  auto probs = poisoned(tokens * experts * 4), index = poisoned(routed * 4), weight = poisoned(routed * 4);
  auto order = poisoned(routed * 4), routed_row = poisoned(routed * 4), counts = poisoned(experts * 4);
  auto permuted = poisoned(routed * cols * 2), combined = poisoned(tokens * cols * 2);
  const std::size_t workspace_bytes = k::moe_sort_workspace_bytes(routed, experts);
  gpu::DeviceBuffer workspace(workspace_bytes);
  k::moe_router_topk(bf(logits), f32(probs), i32(index), f32(weight), tokens, experts, top_k, {}, nullptr);
  k::moe_sort_by_expert(i32(index), routed, experts, i32(order), i32(routed_row), i32(counts), workspace.data(),
                        workspace_bytes, nullptr);
  k::moe_permute(bf(x), i32(order), top_k, bf(permuted), routed, cols, nullptr);
  k::moe_unpermute(bf(permuted), i32(routed_row), f32(weight), nullptr, bf(combined), tokens, top_k, cols, nullptr);

  const MoeShape shape{tokens, experts, top_k, cols};
  const Routing r = reference_routing(shape, bf16_to_host(logits.data(), tokens * experts));
  EXPECT_EQ(i32_to_host(index, routed), r.index);
  EXPECT_EQ(i32_to_host(order, routed), r.order);
  const auto hx = bf16_to_host(x.data(), tokens * cols), hw = f32_to_host(weight.data(), routed);
  std::vector<double> rcomb(tokens * cols, 0.0);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int j = 0; j < top_k; ++j)
      for (std::int64_t c = 0; c < cols; ++c) rcomb[t * cols + c] += hw[t * top_k + j] * hx[t * cols + c];
  EXPECT_LT(report("moe dispatch + combine", relative_error(bf16_to_host(combined.data(), tokens * cols), rcomb)),
            kBf16Tolerance);
}

}  // namespace
}  // namespace twin::test

namespace twin::test {
namespace {

// Forced balance's logits (kernels::moe_random_logits): standard normal in float64 moments (mean within 5 sigma of 0,
// variance within 2% of 1), the same bits for the same key and others for another subsequence or seed, a count
// not a multiple of 4 written to its end and no further; and their top-k, as the router takes it, puts every
// expert's copies within 5 sigma of the uniform share (what Megatron's --moe-router-force-load-balancing is for).
TEST(KernelMoe, RandomLogitsAreStandardNormalKeyedAndSpreadTheTopKEvenly) {
  REQUIRE_GPU();
  const std::int64_t tokens = 8191, count = tokens * 64;
  const int experts = 64, top_k = 8;
  auto logits = poisoned(count * 2), again = poisoned(count * 2), other = poisoned(count * 2), edge = poisoned(count * 2);
  k::moe_random_logits(bf(logits), count, 7, 11, nullptr);
  k::moe_random_logits(bf(again), count, 7, 11, nullptr);
  k::moe_random_logits(bf(other), count, 7, 12, nullptr);
  k::moe_random_logits(bf(edge), count - 1, 7, 11, nullptr);  // not a multiple of 4: its last thread writes 3
  const std::vector<double> v = bf16_to_host(logits.data(), count);
  double sum = 0, squares = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    sum += v[i];
    squares += v[i] * v[i];
  }
  const double mean = sum / count, variance = squares / count - mean * mean;
  EXPECT_LT(std::abs(mean), 5.0 / std::sqrt(static_cast<double>(count)));
  EXPECT_NEAR(variance, 1.0, 0.02);
  const std::vector<double> e = bf16_to_host(edge.data(), count);
  EXPECT_TRUE(std::isnan(e[count - 1])) << "wrote past the end";  // the poison, a bf16 NaN, left alone
  EXPECT_EQ(std::vector<double>(e.begin(), e.end() - 1), std::vector<double>(v.begin(), v.end() - 1));
  EXPECT_EQ(bf16_to_host(again.data(), count), v);
  EXPECT_NE(bf16_to_host(other.data(), count), v);

  auto probs = poisoned(count * 4), index = poisoned(tokens * top_k * 4), weight = poisoned(tokens * top_k * 4);
  k::moe_router_topk(bf(logits), f32(probs), i32(index), f32(weight), tokens, experts, top_k, {}, nullptr);
  std::vector<double> copies(experts, 0.0);
  for (std::int32_t e : i32_to_host(index, tokens * top_k)) copies.at(e) += 1;
  const double share = static_cast<double>(tokens * top_k) / experts, sigma = std::sqrt(share);
  for (int e = 0; e < experts; ++e) EXPECT_NEAR(copies[e], share, 5 * sigma) << "expert " << e;
}

}  // namespace
}  // namespace twin::test
