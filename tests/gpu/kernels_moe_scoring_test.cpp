// The router's scoring variants (kernels::RouterScoring: sigmoid scores, an expert bias, pre-softmax, a scaling
// factor) against float64 CPU references, every output poisoned first: the choice, the scores and weights, the
// logits' gradient through the weights and through the load-balancing loss, that loss's value, and the bias step.
// The reference's gradient is itself checked against central differences of the loss it differentiates.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "gpu/kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

struct ScoringCase {
  const char* name;
  std::int64_t tokens = 0;
  int experts = 0, top_k = 0;
  bool sigmoid = false, pre_softmax = false, bias = false;
  double scale = 1;
  int groups = 0, group_topk = 0;  // group-limited routing (0: none)
};

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// Per token the scores (softmax or sigmoid) of bf16-exact logits on a shuffled grid, so that no two experts' scores
// (or scores + bias) are within rounding of each other.
std::vector<double> grid_logits(const ScoringCase& c) {
  std::uint64_t z = next_seed();
  std::vector<double> logits(c.tokens * c.experts);
  std::vector<int> rank(c.experts);
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    std::iota(rank.begin(), rank.end(), 0);
    for (int e = c.experts - 1; e > 0; --e) {
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(rank[e], rank[(z >> 33) % (e + 1)]);
    }
    for (int e = 0; e < c.experts; ++e) logits[t * c.experts + e] = (rank[e] - c.experts / 2) / 16.0;
    if (c.groups == 0) continue;
    // With groups: each group's experts on a grid within it, the groups a step apart in a shuffled order (half a
    // unit with a bias, which then moves no group's score past another's), so that no two groups' scores are within
    // rounding of each other; and the lowest group spiky, its first expert above every other and the rest far
    // below, so that its top expert leads the choice over all experts but its group is not kept.
    const int size = c.experts / c.groups;
    const double spacing = c.bias ? 0.5 : 0.125;
    std::vector<int> group_rank(c.groups);
    std::iota(group_rank.begin(), group_rank.end(), 0);
    for (int g = c.groups - 1; g > 0; --g) {
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(group_rank[g], group_rank[(z >> 33) % (g + 1)]);
    }
    double highest = -1e9;
    for (int e = 0; e < c.experts; ++e) {
      const double v = ((e * 7) % size - size / 2) / 16.0 + (group_rank[e / size] - c.groups / 2) * spacing;
      logits[t * c.experts + e] = v;
      if (group_rank[e / size] != 0) highest = std::max(highest, v);
    }
    const int spiky = static_cast<int>(std::find(group_rank.begin(), group_rank.end(), 0) - group_rank.begin());
    for (int i = 0; i < size; ++i) logits[t * c.experts + spiky * size + i] = i == 0 ? highest + 0.25 : -4.0;
  }
  return logits;
}

// Biases of up to about three of the grid's sigmoid score steps, multiples of 2^-10: they move choices.
std::vector<double> small_biases(int experts) {
  std::vector<double> bias(experts);
  for (int e = 0; e < experts; ++e) bias[e] = ((e * 37) % 41 - 20) / 1024.0;
  return bias;
}

std::vector<__nv_bfloat16> bf16s(const std::vector<double>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16(static_cast<float>(v[i]));
  return out;
}

std::vector<double> scores_of(const ScoringCase& c, const std::vector<double>& logits) {
  std::vector<double> p(logits.size());
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    const double* l = &logits[t * c.experts];
    const double m = *std::max_element(l, l + c.experts);
    double sum = 0;
    for (int e = 0; e < c.experts; ++e) sum += std::exp(l[e] - m);
    for (int e = 0; e < c.experts; ++e)
      p[t * c.experts + e] = c.sigmoid ? sigmoid(l[e]) : std::exp(l[e] - m) / sum;
  }
  return p;
}

// What the choice is made on: score + bias; the score where groups sum it (sigmoid, pre-softmax); else the logit.
double choice_value(const ScoringCase& c, const std::vector<double>& logits, const std::vector<double>& p,
                    const std::vector<double>& bias, std::int64_t t, int e) {
  if (c.bias) return p[t * c.experts + e] + bias[e];
  if (c.groups > 0 && (c.sigmoid || c.pre_softmax)) return p[t * c.experts + e];
  return logits[t * c.experts + e];
}

// Group-limited routing's kept groups of token t (Megatron's group_limited_topk): each group's score the sum of its
// top top_k / group_topk values, the group_topk highest kept.
std::vector<bool> kept_groups(const ScoringCase& c, const std::vector<double>& logits, const std::vector<double>& p,
                              const std::vector<double>& bias, std::int64_t t) {
  const int size = c.experts / c.groups, per_group = c.top_k / c.group_topk;
  std::vector<double> score(c.groups, 0.0);
  std::vector<double> values(size);
  for (int g = 0; g < c.groups; ++g) {
    for (int i = 0; i < size; ++i) values[i] = choice_value(c, logits, p, bias, t, g * size + i);
    std::sort(values.begin(), values.end(), std::greater<>());
    for (int i = 0; i < per_group; ++i) score[g] += values[i];
  }
  std::vector<int> order(c.groups);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
  std::vector<bool> kept(c.groups, false);
  for (int k = 0; k < c.group_topk; ++k) kept[order[k]] = true;
  return kept;
}

// The weights of the experts in `index` as the header states them.
std::vector<double> weights_for(const ScoringCase& c, const std::vector<double>& p,
                                const std::vector<std::int32_t>& index) {
  std::vector<double> weight(index.size());
  const bool as_they_are = c.sigmoid ? c.top_k == 1 : c.pre_softmax;
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    double chosen = 0;
    for (int j = 0; j < c.top_k; ++j) chosen += p[t * c.experts + index[t * c.top_k + j]];
    for (int j = 0; j < c.top_k; ++j) {
      const double pj = p[t * c.experts + index[t * c.top_k + j]];
      weight[t * c.top_k + j] = (as_they_are ? pj : pj / chosen) * c.scale;
    }
  }
  return weight;
}

// The top-k by choice value, ties to the lower index.
std::vector<std::int32_t> choose(const ScoringCase& c, const std::vector<double>& logits,
                                 const std::vector<double>& p, const std::vector<double>& bias) {
  std::vector<std::int32_t> index(c.tokens * c.top_k);
  std::vector<int> order(c.experts);
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    if (c.groups > 0) {  // only the kept groups' experts
      const std::vector<bool> kept = kept_groups(c, logits, p, bias, t);
      order.erase(std::remove_if(order.begin(), order.end(),
                                 [&](int e) { return !kept[e / (c.experts / c.groups)]; }),
                  order.end());
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return choice_value(c, logits, p, bias, t, a) > choice_value(c, logits, p, bias, t, b);
    });
    for (int j = 0; j < c.top_k; ++j) index[t * c.top_k + j] = order[j];
    order.resize(c.experts);
  }
  return index;
}

// a_e of the load-balancing loss (the header's): coeff * experts * counts[e] / (tokens^2 top_k).
std::vector<double> aux_weights(const ScoringCase& c, const std::vector<std::int32_t>& counts, double coeff) {
  std::vector<double> a(c.experts);
  for (int e = 0; e < c.experts; ++e)
    a[e] = coeff * c.experts * counts[e] / (static_cast<double>(c.tokens) * c.tokens * c.top_k);
  return a;
}

// L = sum_f g_f w_f + sum_{t,e} a_e q_{t,e}, the choice held fixed: what the backward differentiates.
double loss(const ScoringCase& c, const std::vector<double>& logits, const std::vector<std::int32_t>& index,
            const std::vector<double>& g, const std::vector<double>& a) {
  const std::vector<double> p = scores_of(c, logits);
  double l = 0;
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    double chosen = 0, all = 0;
    for (int j = 0; j < c.top_k; ++j) chosen += p[t * c.experts + index[t * c.top_k + j]];
    for (int e = 0; e < c.experts; ++e) all += p[t * c.experts + e];
    const bool as_they_are = c.sigmoid ? c.top_k == 1 : c.pre_softmax;
    for (int j = 0; j < c.top_k; ++j) {
      const double pj = p[t * c.experts + index[t * c.top_k + j]];
      l += g[t * c.top_k + j] * (as_they_are ? pj : pj / chosen) * c.scale;
    }
    for (int e = 0; e < c.experts; ++e) l += a[e] * p[t * c.experts + e] / (c.sigmoid ? all : 1.0);
  }
  return l;
}

// The analytic gradient of `loss`, in float64, as the header states it.
std::vector<double> reference_backward(const ScoringCase& c, const std::vector<double>& p,
                                       const std::vector<std::int32_t>& index, const std::vector<double>& w,
                                       const std::vector<double>& g, const std::vector<double>& a) {
  std::vector<double> d(c.tokens * c.experts, 0.0);
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    const double* pt = &p[t * c.experts];
    double wg = 0, chosen = 0, all = 0, qa = 0;
    for (int j = 0; j < c.top_k; ++j) {
      wg += w[t * c.top_k + j] * g[t * c.top_k + j];
      chosen += pt[index[t * c.top_k + j]];
    }
    for (int e = 0; e < c.experts; ++e) all += pt[e];
    if (!c.sigmoid) all = 1;
    for (int e = 0; e < c.experts; ++e) qa += pt[e] / all * a[e];
    for (int e = 0; e < c.experts; ++e) {
      const double slope = pt[e] * (1 - pt[e]);
      double de = c.sigmoid ? slope * (a[e] - qa) / all : pt[e] * (a[e] - qa);
      if (!c.sigmoid && c.pre_softmax) de -= pt[e] * wg;
      for (int j = 0; j < c.top_k; ++j) {
        if (index[t * c.top_k + j] != e) continue;
        const double gj = g[t * c.top_k + j], wj = w[t * c.top_k + j];
        if (c.sigmoid) de += slope * (c.top_k == 1 ? c.scale * gj : (c.scale * gj - wg) / chosen);
        else if (c.pre_softmax) de += pt[e] * c.scale * gj;
        else de += wj * (gj - wg / c.scale);
      }
      d[t * c.experts + e] = de;
    }
  }
  return d;
}

std::vector<double> random_doubles(std::size_t n) {
  std::uint64_t z = next_seed();
  std::vector<double> v(n);
  for (double& x : v) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>(static_cast<float>(static_cast<double>(z >> 40) / (1 << 24) * 2 - 1));
  }
  return v;
}

class RouterScoringCases : public ::testing::TestWithParam<ScoringCase> {};

// The derivation behind both sides: the reference's gradient equals central differences of its loss.
TEST_P(RouterScoringCases, ReferenceGradientIsTheLossesDerivative) {
  ScoringCase c = GetParam();
  c.tokens = 3;  // a few tokens: every logit perturbed
  std::vector<double> logits = grid_logits(c);
  const std::vector<double> p = scores_of(c, logits), bias = small_biases(c.experts), g = random_doubles(c.tokens * c.top_k);
  const std::vector<std::int32_t> index = choose(c, logits, p, bias);
  const std::vector<double> w = weights_for(c, p, index);
  std::vector<std::int32_t> counts(c.experts, 0);
  for (std::int32_t e : index) ++counts[e];
  const std::vector<double> a = aux_weights(c, counts, 0.3);
  const std::vector<double> d = reference_backward(c, p, index, w, g, a);
  const double h = 1e-6;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double x = logits[i];
    logits[i] = x + h;
    const double up = loss(c, logits, index, g, a);
    logits[i] = x - h;
    const double down = loss(c, logits, index, g, a);
    logits[i] = x;
    EXPECT_NEAR(d[i], (up - down) / (2 * h), 1e-7) << "logit " << i;
  }
}

// The choice within rounding of the reference's (each pick's value that of the reference's pick at its place, so
// that two values a float apart may trade places), the scores, and the weights of the experts the kernel chose.
TEST_P(RouterScoringCases, ChoiceScoresAndWeights) {
  REQUIRE_GPU();
  const ScoringCase c = GetParam();
  const std::vector<double> logits = grid_logits(c), p = scores_of(c, logits), bias = small_biases(c.experts);
  const std::vector<std::int32_t> index = choose(c, logits, p, bias);
  auto d_logits = upload(bf16s(logits));
  auto d_bias = upload(std::vector<float>(bias.begin(), bias.end()));
  auto probs = poisoned(c.tokens * c.experts * 4), got_index = poisoned(index.size() * 4),
       weight = poisoned(index.size() * 4);
  const k::RouterScoring scoring{c.sigmoid, c.pre_softmax, static_cast<float>(c.scale),
                                 c.bias ? f32(d_bias) : nullptr, c.groups, c.group_topk};
  k::moe_router_topk(bf(d_logits), f32(probs), i32(got_index), f32(weight), c.tokens, c.experts, c.top_k, scoring,
                     nullptr);
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::int32_t> got(index.size());
  TWIN_CUDA_CHECK(cudaMemcpy(got.data(), got_index.data(), index.size() * 4, cudaMemcpyDeviceToHost));
  const std::vector<std::int32_t> unbiased =
      choose(ScoringCase{c.name, c.tokens, c.experts, c.top_k, c.sigmoid, c.pre_softmax, false, c.scale, c.groups,
                         c.group_topk},
             logits, p, bias);
  const std::vector<std::int32_t> ungrouped =
      choose(ScoringCase{c.name, c.tokens, c.experts, c.top_k, c.sigmoid, c.pre_softmax, c.bias, c.scale}, logits, p,
             bias);
  int moved_by_groups = 0;
  for (std::size_t f = 0; f < index.size(); ++f) moved_by_groups += index[f] != ungrouped[f];
  if (c.groups > 0) EXPECT_GT(moved_by_groups, 0) << "the group limit changes some choices";
  int moved_by_bias = 0;
  for (std::size_t f = 0; f < index.size(); ++f) {
    const std::int64_t t = static_cast<std::int64_t>(f) / c.top_k;
    EXPECT_NEAR(choice_value(c, logits, p, bias, t, got[f]), choice_value(c, logits, p, bias, t, index[f]), 1e-6)
        << "token " << t << " pick " << f % c.top_k;
    moved_by_bias += index[f] != unbiased[f];
  }
  if (c.bias) EXPECT_GT(moved_by_bias, 0) << "the biases change some choices";
  EXPECT_LT(report(c.name, relative_error(f32_to_host(probs.data(), p.size()), p)), kF32Tolerance);
  EXPECT_LT(report(c.name, relative_error(f32_to_host(weight.data(), got.size()), weights_for(c, p, got))),
            kF32Tolerance);
}

TEST_P(RouterScoringCases, LogitsGradientAndLossValue) {
  REQUIRE_GPU();
  const ScoringCase c = GetParam();
  const std::vector<double> logits = grid_logits(c), p = scores_of(c, logits), bias = small_biases(c.experts);
  const std::vector<std::int32_t> index = choose(c, logits, p, bias);
  const std::vector<double> w = weights_for(c, p, index);
  std::vector<std::int32_t> counts(c.experts, 0);
  for (std::int32_t e : index) ++counts[e];
  const std::vector<double> g = random_doubles(index.size());
  const float coeff = 0.01f;
  const k::RouterScoring scoring{c.sigmoid, c.pre_softmax, static_cast<float>(c.scale), nullptr};
  auto d_p = upload(std::vector<float>(p.begin(), p.end())), d_index = upload(index),
       d_w = upload(std::vector<float>(w.begin(), w.end())), d_g = upload(std::vector<float>(g.begin(), g.end())),
       d_counts = upload(counts), d_logits = poisoned(p.size() * 2), aux = upload(std::vector<float>{0.f});
  k::moe_router_backward(f32(d_p), i32(d_index), f32(d_w), f32(d_g), i32(d_counts), coeff, bf(d_logits), c.tokens,
                         c.experts, c.top_k, scoring, nullptr);
  k::moe_aux_loss(f32(d_p), i32(d_counts), coeff, f32(aux), c.tokens, c.experts, c.top_k, scoring, nullptr);
  // The reference from the values the kernels read (fp32 scores and weights).
  const auto hp = f32_to_host(d_p.data(), p.size()), hw = f32_to_host(d_w.data(), w.size()),
             hg = f32_to_host(d_g.data(), g.size());
  const std::vector<double> a = aux_weights(c, counts, coeff);
  EXPECT_LT(report(c.name, relative_error(bf16_to_host(d_logits.data(), p.size()),
                                          reference_backward(c, hp, index, hw, hg, a))),
            kBf16Tolerance);
  double value = 0;
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    double all = 0, weighted = 0;
    for (int e = 0; e < c.experts; ++e) {
      all += hp[t * c.experts + e];
      weighted += a[e] * hp[t * c.experts + e];
    }
    value += c.sigmoid ? weighted / all : weighted;
  }
  EXPECT_LT(report(c.name, std::abs(f32_to_host(aux.data(), 1)[0] - value) / value), kF32Tolerance);
}

// Softmax renormalised with a scale; pre-softmax at top-1 and top-2 (DeepSeek-V2's 16x); sigmoid at top-1, and at
// top-8 of 64 and 128 with DeepSeek-V3's bias and 2.5x; group-limited routing as DeepSeek-V3 (4 of 8 groups, 256
// experts) and V2 (3 of 8, 160 experts, top-6) run it; 37 to 300 tokens (not multiples of a block's 8 warps).
INSTANTIATE_TEST_SUITE_P(
    Scorings, RouterScoringCases,
    ::testing::Values(ScoringCase{"softmax scaled", 37, 8, 2, false, false, false, 2.5},
                      ScoringCase{"pre-softmax top-1", 45, 16, 1, false, true, false, 1},
                      ScoringCase{"pre-softmax top-2 x16", 37, 64, 2, false, true, false, 16},
                      ScoringCase{"sigmoid top-1", 37, 8, 1, true, false, false, 1},
                      ScoringCase{"sigmoid top-8", 300, 64, 8, true, false, false, 1},
                      ScoringCase{"sigmoid top-8 bias x2.5", 300, 64, 8, true, false, true, 2.5},
                      ScoringCase{"sigmoid top-8 of 128 bias", 97, 128, 8, true, false, true, 1},
                      ScoringCase{"sigmoid top-8 bias groups 4 of 8", 300, 64, 8, true, false, true, 2.5, 8, 4},
                      ScoringCase{"softmax top-6 groups 3 of 8", 97, 160, 6, false, false, false, 1, 8, 3},
                      ScoringCase{"pre-softmax top-6 groups 3 of 8", 97, 64, 6, false, true, false, 16, 8, 3},
                      ScoringCase{"sigmoid top-8 of 256 groups 4 of 8", 45, 256, 8, true, false, false, 1, 8, 4}),
    [](const ::testing::TestParamInfo<ScoringCase>& info) { return "case" + std::to_string(info.index); });

// The bias step: up by the rate below the mean, down above it, unchanged at it (Megatron's sign), on counts summed
// over ranks (int64).
TEST(KernelMoeScoring, ExpertBiasStepsTowardTheMeanLoad) {
  REQUIRE_GPU();
  const std::vector<std::int64_t> counts = {10, 30, 20, 20, 5'000'000'000LL, 0};  // mean 833,333,346.67
  const std::vector<float> before = {0.f, 0.5f, -0.25f, 1e-3f, 0.f, -1.f};
  auto d_counts = upload(counts), bias = upload(before);
  k::moe_update_expert_bias(static_cast<const std::int64_t*>(d_counts.data()), 1e-3f, f32(bias), 6, nullptr);
  const std::vector<double> got = f32_to_host(bias.data(), 6);
  for (int e = 0; e < 6; ++e) {
    const float expected = before[e] + (e == 4 ? -1e-3f : 1e-3f);
    EXPECT_EQ(got[e], static_cast<double>(expected)) << "expert " << e;
  }
  const std::vector<std::int64_t> even = {7, 7, 7};
  auto d_even = upload(even), unchanged = upload(std::vector<float>{0.125f, -2.f, 3.f});
  k::moe_update_expert_bias(static_cast<const std::int64_t*>(d_even.data()), 1e-3f, f32(unchanged), 3, nullptr);
  EXPECT_EQ(f32_to_host(unchanged.data(), 3), (std::vector<double>{0.125, -2.0, 3.0}));
  EXPECT_THROW(k::moe_update_expert_bias(static_cast<const std::int64_t*>(d_even.data()), 0.f, f32(unchanged), 3,
                                         nullptr),
               std::invalid_argument);
  const k::RouterScoring softmax_with_bias{false, false, 1.f, f32(unchanged)};
  auto logits = random_bf16(8 * 3), probs = poisoned(8 * 3 * 4), index = poisoned(8 * 4), weight = poisoned(8 * 4);
  EXPECT_THROW(k::moe_router_topk(bf(logits), f32(probs), i32(index), f32(weight), 8, 3, 1, softmax_with_bias, nullptr),
               std::invalid_argument)
      << "Megatron's rule: an expert bias with sigmoid scores only";
}

}  // namespace
}  // namespace twin::test
