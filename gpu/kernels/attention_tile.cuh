// Pieces shared by the attention kernels' launchers and bodies: the log-base constants of the
// exp2-domain softmax and the check of the shapes and layouts the kernels can run.
#pragma once
#include "gpu/kernels/common.cuh"

namespace twin::kernels::detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Whether `key` lies left of query `row`'s sliding window of `window` keys (itself and the window - 1 before it; 0:
// no window, AttentionDims::window).
__host__ __device__ inline bool outside_window(std::int64_t key, std::int64_t row, std::int64_t window) {
  return window > 0 && key + window <= row;
}
// The first key of the tile (of `tile` keys) holding the first key query `row` sees through its window.
__host__ __device__ inline std::int64_t first_key_tile(std::int64_t row, std::int64_t window, int tile) {
  if (window <= 0 || row < window) return 0;
  return (row - window + 1) / tile * tile;
}

// A score as the softmax sees it, in the exp2 domain: the raw q.k times scale (1/sqrt(d)), soft-capped where softcap
// > 0 (cap x tanh(scaled / cap), AttentionDims::softcap), times log2(e). `slope` gets d(capped) / d(scaled), the
// factor a score's gradient takes through the cap: 1 - tanh^2 (1 without a cap).
struct ScoreMap {
  float scale = 1, softcap = 0;
  __device__ float log2_score(float raw, float* slope = nullptr) const {
    const float scaled = raw * scale;
    if (softcap <= 0) {
      if (slope) *slope = 1.f;
      return scaled * kLog2e;
    }
    const float t = tanhf(scaled / softcap);
    if (slope) *slope = 1.f - t * t;
    return softcap * t * kLog2e;
  }
};

// Fills in contiguous strides (a stride of 0) and rejects shapes and layouts the kernels cannot run.
void check_attention_dims(AttentionDims& dims, const void* q, const void* k, const void* v);

}  // namespace twin::kernels::detail
