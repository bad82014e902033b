// Softmax cross-entropy without fusion: Megatron-LM's `_VocabParallelCrossEntropy` on an fp32 copy of the logits,
// one kernel per pass as core/unfused_loss.hpp lists them (each torch op of Megatron's a kernel here): a block per
// row where a pass reduces or reads a row's value, a grid-stride loop where it is elementwise. Four floats per access
// where a row's width is a multiple of four (rows then start 16-byte aligned), one otherwise (GPT-2's 50,257).
#include <cmath>

#include "gpu/kernels/common.cuh"
#include "gpu/unfused_kernels.hpp"

namespace twin::kernels {
namespace {

constexpr int kThreads = 256;

unsigned row_grid(std::int64_t rows) { return static_cast<unsigned>(rows < 65535 * 8 ? rows : 65535 * 8); }

// Whether rows of `cols` floats from `base` take the four-wide path.
bool four_wide(const void* base, std::int64_t cols) { return cols % 4 == 0 && detail::aligned16(base); }

__device__ __forceinline__ float4 load4(const float* row, std::int64_t q) {
  return reinterpret_cast<const float4*>(row)[q];
}
__device__ __forceinline__ void store4(float* row, std::int64_t q, float4 v) { reinterpret_cast<float4*>(row)[q] = v; }

__global__ void rows_max_kernel(const float* x, float* row_max, std::int64_t rows, std::int64_t cols, bool wide) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float m = -INFINITY;
    const float* row = x + r * cols;
    if (wide) {
      for (std::int64_t q = threadIdx.x; q < cols / 4; q += blockDim.x) {
        const float4 v = load4(row, q);
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
      }
    } else {
      for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    }
    m = detail::block_max(m, scratch);
    if (threadIdx.x == 0) row_max[r] = m;
  }
}

__global__ void subtract_gather_kernel(float* x, const float* row_max, const std::int32_t* targets,
                                       float* target_logit, std::int64_t rows, std::int64_t cols,
                                       std::int64_t vocab_start, bool wide) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float m = row_max[r];
    const std::int64_t target = static_cast<std::int64_t>(targets[r]) - vocab_start;
    float* row = x + r * cols;
    if (wide) {
      for (std::int64_t q = threadIdx.x; q < cols / 4; q += blockDim.x) {
        float4 v = load4(row, q);
        v.x -= m, v.y -= m, v.z -= m, v.w -= m;
        store4(row, q, v);
      }
    } else {
      for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] -= m;
    }
    // The target's shifted logit, as written (each thread reads back only what it wrote itself: no barrier).
    const bool mine = target >= 0 && target < cols && (wide ? (target / 4) % blockDim.x : target % blockDim.x) == threadIdx.x;
    if (mine) target_logit[r] = row[target];
    if (threadIdx.x == 0 && (target < 0 || target >= cols)) target_logit[r] = 0.f;
  }
}

__global__ void exp_kernel(float* x, std::int64_t count, bool wide) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (wide) {
    for (std::int64_t q = first; q < count / 4; q += stride) {
      float4 v = load4(x, q);
      v.x = expf(v.x), v.y = expf(v.y), v.z = expf(v.z), v.w = expf(v.w);
      store4(x, q, v);
    }
    return;
  }
  for (std::int64_t i = first; i < count; i += stride) x[i] = expf(x[i]);
}

__global__ void rows_sum_kernel(const float* x, float* sum, std::int64_t rows, std::int64_t cols, bool wide) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float s = 0.f;
    const float* row = x + r * cols;
    if (wide) {
      for (std::int64_t q = threadIdx.x; q < cols / 4; q += blockDim.x) {
        const float4 v = load4(row, q);
        s += (v.x + v.y) + (v.z + v.w);
      }
    } else {
      for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    }
    s = detail::block_sum(s, scratch);
    if (threadIdx.x == 0) sum[r] = s;
  }
}

__global__ void divide_loss_kernel(float* x, const float* sum, const float* target_logit, float* loss,
                                   std::int64_t rows, std::int64_t cols, bool wide) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float inverse = 1.f / sum[r];
    float* row = x + r * cols;
    if (wide) {
      for (std::int64_t q = threadIdx.x; q < cols / 4; q += blockDim.x) {
        float4 v = load4(row, q);
        v.x *= inverse, v.y *= inverse, v.z *= inverse, v.w *= inverse;
        store4(row, q, v);
      }
    } else {
      for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] *= inverse;
    }
    if (threadIdx.x == 0) loss[r] = logf(sum[r]) - target_logit[r];
  }
}

__global__ void minus_onehot_kernel(float* x, const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                                    std::int64_t vocab_start, float scale, bool wide) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t target = static_cast<std::int64_t>(targets[r]) - vocab_start;
    float* row = x + r * cols;
    if (wide) {
      for (std::int64_t q = threadIdx.x; q < cols / 4; q += blockDim.x) {
        float4 v = load4(row, q);
        const std::int64_t c = 4 * q;
        v.x = (v.x - (c == target ? 1.f : 0.f)) * scale, v.y = (v.y - (c + 1 == target ? 1.f : 0.f)) * scale;
        v.z = (v.z - (c + 2 == target ? 1.f : 0.f)) * scale, v.w = (v.w - (c + 3 == target ? 1.f : 0.f)) * scale;
        store4(row, q, v);
      }
    } else {
      for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] = (row[c] - (c == target ? 1.f : 0.f)) * scale;
    }
  }
}

__global__ void f32_to_bf16_kernel(const float* in, bf16* out, std::int64_t count, bool wide) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (wide) {  // four floats in, four bf16 (8 bytes) out
    for (std::int64_t q = first; q < count / 4; q += stride) {
      const float4 v = load4(in, q);
      const __nv_bfloat162 low = __floats2bfloat162_rn(v.x, v.y), high = __floats2bfloat162_rn(v.z, v.w);
      reinterpret_cast<uint2*>(out)[q] =
          make_uint2(*reinterpret_cast<const unsigned*>(&low), *reinterpret_cast<const unsigned*>(&high));
    }
    return;
  }
  for (std::int64_t i = first; i < count; i += stride) out[i] = detail::to_bf16(in[i]);
}

void require_rows(std::int64_t rows, std::int64_t cols, const char* what) {
  detail::require(rows > 0 && cols > 0, what);
}

}  // namespace

void rows_max_f32(const float* x, float* row_max, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  require_rows(rows, cols, "rows_max_f32: an empty shape");
  rows_max_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, row_max, rows, cols, four_wide(x, cols));
  TWIN_CUDA_CHECK_LAUNCH();
}

void subtract_rows_gather_target_f32(float* x, const float* row_max, const std::int32_t* targets, float* target_logit,
                                     std::int64_t rows, std::int64_t cols, std::int64_t vocab_start,
                                     cudaStream_t stream) {
  require_rows(rows, cols, "subtract_rows_gather_target_f32: an empty shape");
  subtract_gather_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, row_max, targets, target_logit, rows, cols,
                                                                   vocab_start, four_wide(x, cols));
  TWIN_CUDA_CHECK_LAUNCH();
}

void exp_f32(float* x, std::int64_t count, cudaStream_t stream) {
  detail::require(count > 0, "exp_f32: no elements");
  const bool wide = four_wide(x, count);
  exp_kernel<<<detail::grid_for(wide ? count / 4 : count, kThreads), kThreads, 0, stream>>>(x, count, wide);
  TWIN_CUDA_CHECK_LAUNCH();
}

void rows_sum_f32(const float* x, float* sum, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  require_rows(rows, cols, "rows_sum_f32: an empty shape");
  rows_sum_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, sum, rows, cols, four_wide(x, cols));
  TWIN_CUDA_CHECK_LAUNCH();
}

void softmax_divide_loss_f32(float* x, const float* sum, const float* target_logit, float* loss, std::int64_t rows,
                             std::int64_t cols, cudaStream_t stream) {
  require_rows(rows, cols, "softmax_divide_loss_f32: an empty shape");
  divide_loss_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, sum, target_logit, loss, rows, cols,
                                                              four_wide(x, cols));
  TWIN_CUDA_CHECK_LAUNCH();
}

void softmax_minus_onehot_f32(float* x, const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                              std::int64_t vocab_start, float scale, cudaStream_t stream) {
  require_rows(rows, cols, "softmax_minus_onehot_f32: an empty shape");
  minus_onehot_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, targets, rows, cols, vocab_start, scale,
                                                               four_wide(x, cols));
  TWIN_CUDA_CHECK_LAUNCH();
}

void f32_to_bf16(const float* in, bf16* out, std::int64_t count, cudaStream_t stream) {
  detail::require(count > 0, "f32_to_bf16: no elements");
  const bool wide = four_wide(in, count) && reinterpret_cast<std::uintptr_t>(out) % 8 == 0;
  f32_to_bf16_kernel<<<detail::grid_for(wide ? count / 4 : count, kThreads), kThreads, 0, stream>>>(in, out, count,
                                                                                                      wide);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
