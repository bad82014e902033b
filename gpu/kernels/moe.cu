// Mixture-of-experts router: the scores (softmax or sigmoid) and top-k of the router's logits, its backward (through
// the chosen weights and through the load-balancing loss), that loss's value, and aux-loss-free balancing's bias
// step. One warp per token; experts <= 1024, so a lane owns at most 32 experts (l, l + 32, ...). Routed-row movement
// is in moe_dispatch.cu.
#include <curand_kernel.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;
using detail::warp_max;
using detail::warp_sum;

constexpr int kWarpsPerBlock = 8;

// Four logits per thread: element g of cuRAND's Philox4x32-10 stream of (seed, subsequence) at offset g, the four
// normals curand_normal4 makes of one curand_init there.
__global__ void random_logits_kernel(bf16* logits, std::int64_t count, std::uint64_t seed, std::uint64_t subsequence) {
  const std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (first >= count) return;
  curandStatePhilox4_32_10_t state;
  curand_init(seed, subsequence, static_cast<unsigned long long>(first), &state);
  const float4 v = curand_normal4(&state);
  const float values[4] = {v.x, v.y, v.z, v.w};
  for (int i = 0; i < 4 && first + i < count; ++i) logits[first + i] = to_bf16(values[i]);
}

__device__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// One token's row as the top-k reads it: what the choice is made of, at the experts a lane owns (its own writes of
// `scores`): score + bias with a bias; the score where groups are summed (pre-softmax, sigmoid); else the logit.
struct ChoiceRow {
  const bf16* logits;
  const float* scores;
  const float* bias;
  bool by_score;
  __device__ float value(int e) const {
    return bias ? scores[e] + bias[e] : by_score ? scores[e] : to_float(logits[e]);
  }
};

// The warp's best (value, index) of every lane's candidate, ties to the lower index; index `none`: no candidate.
// Symmetric: every lane ends with the same winner.
__device__ void warp_argmax(float& best, int& best_index, int none) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    if (other_index < none && (best_index == none || other > best || (other == best && other_index < best_index))) {
      best = other;
      best_index = other_index;
    }
  }
}

// Group-limited routing (Megatron's group_limited_topk): each group's score the sum of its top `per_group` values,
// the group_topk best groups (ties to the lower group) kept; returns this lane's experts outside them as `taken`
// bits (bit i: expert lane + 32 i).
__device__ unsigned outside_chosen_groups(const ChoiceRow& row, int experts, int top_k, const RouterScoring& scoring,
                                          int lane) {
  const int group_size = experts / scoring.num_groups, per_group = top_k / scoring.group_topk;
  float group_score[kMoeMaxRouterGroups];
  for (int g = 0; g < scoring.num_groups; ++g) {
    unsigned used = 0;
    group_score[g] = 0.f;
    for (int r = 0; r < per_group; ++r) {
      float best = -INFINITY;
      int best_index = experts;
      for (int e = lane, i = 0; e < experts; e += 32, ++i) {
        if (e / group_size != g || ((used >> i) & 1u)) continue;
        const float value = row.value(e);
        if (best_index == experts || value > best) {
          best = value;
          best_index = e;
        }
      }
      warp_argmax(best, best_index, experts);
      if ((best_index & 31) == lane) used |= 1u << (best_index >> 5);
      group_score[g] += best;
    }
  }
  unsigned kept = 0;  // bit g: group g chosen
  for (int k = 0; k < scoring.group_topk; ++k) {
    int best = -1;
    for (int g = 0; g < scoring.num_groups; ++g)
      if (!((kept >> g) & 1u) && (best < 0 || group_score[g] > group_score[best])) best = g;
    kept |= 1u << best;
  }
  unsigned outside = 0;
  for (int e = lane, i = 0; e < experts; e += 32, ++i)
    if (!((kept >> (e / group_size)) & 1u)) outside |= 1u << i;
  return outside;
}

__global__ void router_topk_kernel(const bf16* logits, float* probs, std::int32_t* expert_index, float* expert_weight,
                                   std::int64_t tokens, int experts, int top_k, RouterScoring scoring) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + warp;
  if (t >= tokens) return;  // whole warps leave together: no block barrier follows
  const bf16* row = logits + t * experts;
  float m = -INFINITY, s = 0.f;  // the softmax's max and sum
  if (!scoring.sigmoid) {
    for (int e = lane; e < experts; e += 32) m = fmaxf(m, to_float(row[e]));
    m = warp_max(m);
    for (int e = lane; e < experts; e += 32) s += expf(to_float(row[e]) - m);
    s = warp_sum(s);
  }
  // The same expression wherever an expert's score is needed, so that probs and the weights agree bit for bit.
  const auto score = [&](int e) { return scoring.sigmoid ? sigmoid(to_float(row[e])) : expf(to_float(row[e]) - m) / s; };
  for (int e = lane; e < experts; e += 32) probs[t * experts + e] = score(e);
  const bool grouped = scoring.group_topk > 0;
  const ChoiceRow choice{row, probs + t * experts, scoring.expert_bias,
                         grouped && (scoring.sigmoid || scoring.pre_softmax)};

  // k rounds of a warp-wide argmax over the experts not yet taken; bit i of a lane's `taken` marks its expert
  // lane + 32 i (with groups, every expert outside the chosen ones from the start). Lane k keeps round k's choice,
  // so the k choices are written in order at the end.
  unsigned taken = grouped ? outside_chosen_groups(choice, experts, top_k, scoring, lane) : 0u;
  int my_index = 0;
  float my_prob = 0.f, chosen_sum = 0.f;
  for (int k = 0; k < top_k; ++k) {
    float best = -INFINITY;
    int best_index = experts;
    for (int e = lane, i = 0; e < experts; e += 32, ++i) {  // e increases: a tie keeps the lower index
      const float value = choice.value(e);
      if (!((taken >> i) & 1u) && (best_index == experts || value > best)) {
        best = value;
        best_index = e;
      }
    }
    warp_argmax(best, best_index, experts);
    if ((best_index & 31) == lane) taken |= 1u << (best_index >> 5);
    const float p = score(best_index);  // the same expression as probs[t, best_index]
    chosen_sum += p;
    if (lane == k) {
      my_index = best_index;
      my_prob = p;
    }
  }
  const bool as_they_are = scoring.sigmoid ? top_k == 1 : scoring.pre_softmax;
  if (lane < top_k) {
    expert_index[t * top_k + lane] = my_index;
    expert_weight[t * top_k + lane] = (as_they_are ? my_prob : my_prob / chosen_sum) * scoring.topk_scale;
  }
}

// aux_scale = aux_coeff * experts / (tokens^2 top_k), so a_e = aux_scale * counts[e].
__global__ void router_backward_kernel(const float* probs, const std::int32_t* expert_index,
                                       const float* expert_weight, const float* d_weight, const std::int32_t* counts,
                                       float aux_scale, bf16* d_logits, std::int64_t tokens, int experts, int top_k,
                                       RouterScoring scoring) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + warp;
  if (t >= tokens) return;
  const float* p = probs + t * experts;
  const std::int32_t* chosen = expert_index + t * top_k;
  const float* w = expert_weight + t * top_k;
  const float* g = d_weight + t * top_k;
  const float c = scoring.topk_scale;
  // sum_i q_i a_i over all experts, q the aux loss's probabilities (sigmoid: the scores over their sum, all_sum)
  float qa = 0.f, all_sum = 1.f;
  if (aux_scale != 0.f) {  // uniform over the warp
    if (scoring.sigmoid) {
      all_sum = 0.f;
      for (int e = lane; e < experts; e += 32) all_sum += p[e];
      all_sum = warp_sum(all_sum);
    }
    for (int e = lane; e < experts; e += 32) qa += p[e] / all_sum * (aux_scale * static_cast<float>(counts[e]));
    qa = warp_sum(qa);
  }
  float wg = 0.f, chosen_sum = 0.f;  // sum_i w_i g_i and sum_i p_i over the chosen
  for (int j = 0; j < top_k; ++j) {
    wg += w[j] * g[j];
    chosen_sum += p[chosen[j]];
  }
  for (int e = lane; e < experts; e += 32) {
    const float sigmoid_slope = p[e] * (1.f - p[e]);  // d s / d logit
    float d = 0.f;
    if (aux_scale != 0.f) {
      const float a = aux_scale * static_cast<float>(counts[e]);
      d = scoring.sigmoid ? sigmoid_slope * (a - qa) / all_sum : p[e] * (a - qa);
    }
    if (!scoring.sigmoid && scoring.pre_softmax) d -= p[e] * wg;  // every expert, through the full softmax
    for (int j = 0; j < top_k; ++j) {
      if (chosen[j] != e) continue;
      if (scoring.sigmoid)
        d += sigmoid_slope * (top_k == 1 ? c * g[j] : (c * g[j] - wg) / chosen_sum);
      else if (scoring.pre_softmax)
        d += p[e] * c * g[j];
      else
        d += w[j] * (g[j] - wg / c);
    }
    d_logits[t * experts + e] = to_bf16(d);
  }
}

// Per token sum_e s_e counts[e] / sum_e s_e (the sigmoid scores normalised), summed over tokens in a fixed order:
// warp w takes tokens w, w + 32, ...; the warps' sums are added in warp order (deterministic).
__global__ void normalised_aux_loss_kernel(const float* scores, const std::int32_t* counts, float scale,
                                           float* aux_sum, std::int64_t tokens, int experts) {
  __shared__ float warp_sums[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float total = 0.f;
  for (std::int64_t t = warp; t < tokens; t += 32) {
    const float* s = scores + t * experts;
    float sum = 0.f, weighted = 0.f;
    for (int e = lane; e < experts; e += 32) {
      sum += s[e];
      weighted += s[e] * static_cast<float>(counts[e]);
    }
    total += warp_sum(weighted) / warp_sum(sum);
  }
  if (lane == 0) warp_sums[warp] = total;
  __syncthreads();
  if (threadIdx.x != 0) return;
  float sum = 0.f;
  for (int i = 0; i < 32; ++i) sum += warp_sums[i];
  *aux_sum += scale * sum;
}

// One thread: the mean in double over the experts' counts in order, then each expert's step.
__global__ void update_expert_bias_kernel(const std::int64_t* counts, float rate, float* bias, int experts) {
  double sum = 0;
  for (int e = 0; e < experts; ++e) sum += static_cast<double>(counts[e]);
  const double mean = sum / experts;
  for (int e = 0; e < experts; ++e) {
    const double offset = mean - static_cast<double>(counts[e]);
    bias[e] += offset > 0 ? rate : offset < 0 ? -rate : 0.f;
  }
}

// sum over probs [tokens, experts] of probs[t, e] * counts[e], by one block in a fixed order (deterministic).
// Thread i reads elements i, i + blockDim.x, ...: their expert advances by blockDim.x % experts each step.
__global__ void aux_loss_kernel(const float* probs, const std::int32_t* counts, float scale, float* aux_sum,
                                std::int64_t elements, int experts) {
  __shared__ float scratch[32];
  const int step = static_cast<int>(blockDim.x) % experts;
  int e = static_cast<int>(threadIdx.x) % experts;
  float sum = 0.f;
  for (std::int64_t i = threadIdx.x; i < elements; i += blockDim.x) {
    sum += probs[i] * static_cast<float>(counts[e]);
    e += step;
    if (e >= experts) e -= experts;
  }
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) *aux_sum += scale * sum;
}

unsigned token_blocks(std::int64_t tokens) {
  return static_cast<unsigned>((tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

void require_router_shape(std::int64_t tokens, int experts, int top_k, const char* what) {
  detail::require(tokens > 0 && experts > 0 && experts <= kMoeMaxExperts && top_k >= 1 && top_k <= kMoeMaxTopK &&
                      top_k <= experts,
                  what);
}

// Megatron's combinations only (TransformerConfig's checks): an expert bias with sigmoid scores, pre-softmax with
// softmax ones; a positive finite scale.
void require_scoring(const RouterScoring& scoring, const char* what) {
  const bool megatrons = !(scoring.expert_bias && !scoring.sigmoid) && !(scoring.pre_softmax && scoring.sigmoid) &&
                         scoring.topk_scale > 0.f && std::isfinite(scoring.topk_scale);
  if (!megatrons)
    throw std::invalid_argument(std::string("twin kernel: ") + what +
                                ": need an expert bias with sigmoid scores only, pre-softmax with softmax ones only, "
                                "and a positive finite scale");
}

void require_groups(const RouterScoring& scoring, int experts, int top_k) {
  if (scoring.group_topk == 0) return;
  const int groups = scoring.num_groups;
  const bool fits = groups >= 1 && groups <= kMoeMaxRouterGroups && experts % groups == 0 &&
                    scoring.group_topk <= groups && scoring.group_topk <= top_k &&
                    scoring.group_topk * (experts / groups) >= top_k;
  if (!fits)
    throw std::invalid_argument(
        "twin kernel: moe_router_topk: need 1 <= num_groups <= 32 dividing the experts, group_topk at most num_groups "
        "and top_k, and the chosen groups holding top_k experts");
}

// aux_coeff * experts / (tokens^2 top_k), in double: tokens^2 overflows fp32's exact range long before int64's.
float aux_scale(float aux_coeff, std::int64_t tokens, int experts, int top_k) {
  return static_cast<float>(static_cast<double>(aux_coeff) * experts /
                            (static_cast<double>(tokens) * static_cast<double>(tokens) * top_k));
}

}  // namespace

void moe_router_topk(const bf16* logits, float* probs, std::int32_t* expert_index, float* expert_weight,
                     std::int64_t tokens, int experts, int top_k, const RouterScoring& scoring, cudaStream_t stream) {
  require_router_shape(tokens, experts, top_k,
                       "moe_router_topk: need tokens > 0, 1 <= top_k <= min(8, experts), experts <= 1024");
  require_scoring(scoring, "moe_router_topk");
  require_groups(scoring, experts, top_k);
  router_topk_kernel<<<token_blocks(tokens), kWarpsPerBlock * 32, 0, stream>>>(
      logits, probs, expert_index, expert_weight, tokens, experts, top_k, scoring);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_random_logits(bf16* logits, std::int64_t count, std::uint64_t seed, std::uint64_t subsequence,
                       cudaStream_t stream) {
  detail::require(count > 0, "moe_random_logits: need count > 0");
  constexpr int kThreads = 256;
  const std::int64_t threads = (count + 3) / 4;
  random_logits_kernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      logits, count, seed, subsequence);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_router_backward(const float* probs, const std::int32_t* expert_index, const float* expert_weight,
                         const float* d_weight, const std::int32_t* counts, float aux_coeff, bf16* d_logits,
                         std::int64_t tokens, int experts, int top_k, const RouterScoring& scoring,
                         cudaStream_t stream) {
  require_router_shape(tokens, experts, top_k,
                       "moe_router_backward: need tokens > 0, 1 <= top_k <= min(8, experts), experts <= 1024");
  require_scoring(scoring, "moe_router_backward");
  detail::require(aux_coeff == 0.f || counts != nullptr, "moe_router_backward: a load-balancing loss needs counts");
  router_backward_kernel<<<token_blocks(tokens), kWarpsPerBlock * 32, 0, stream>>>(
      probs, expert_index, expert_weight, d_weight, counts, aux_scale(aux_coeff, tokens, experts, top_k), d_logits,
      tokens, experts, top_k, scoring);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_aux_loss(const float* probs, const std::int32_t* counts, float aux_coeff, float* aux_sum,
                  std::int64_t tokens, int experts, int top_k, const RouterScoring& scoring, cudaStream_t stream) {
  require_router_shape(tokens, experts, top_k,
                       "moe_aux_loss: need tokens > 0, 1 <= top_k <= min(8, experts), experts <= 1024");
  require_scoring(scoring, "moe_aux_loss");
  const float scale = aux_scale(aux_coeff, tokens, experts, top_k);
  if (scoring.sigmoid)
    normalised_aux_loss_kernel<<<1, 1024, 0, stream>>>(probs, counts, scale, aux_sum, tokens, experts);
  else
    aux_loss_kernel<<<1, 1024, 0, stream>>>(probs, counts, scale, aux_sum, tokens * experts, experts);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_update_expert_bias(const std::int64_t* counts, float rate, float* bias, int experts, cudaStream_t stream) {
  detail::require(experts > 0 && experts <= kMoeMaxExperts && rate > 0.f,
                  "moe_update_expert_bias: need 0 < experts <= 1024 and rate > 0");
  update_expert_bias_kernel<<<1, 1, 0, stream>>>(counts, rate, bias, experts);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
