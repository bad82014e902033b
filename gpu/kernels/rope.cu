// Rotary embedding, rotate-half convention: within a head, element i < d/2 pairs with i + d/2 and the
// pair rotates by angle pos * theta^(-2i/d). One thread per pair (eight with 16-byte accesses where the head
// and rows allow); q and k heads in one launch.
#include <cmath>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;
using detail::Float8;
using detail::load8;
using detail::store8;
using detail::aligned16;

__global__ void rope_table_kernel(float2* table, std::int64_t max_positions, int half, float theta) {
  const std::int64_t index = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (index >= max_positions * half) return;
  const std::int64_t pos = index / half;
  const int i = static_cast<int>(index % half);
  // In double: pos * inv_freq reaches thousands of radians, where fp32 argument reduction loses digits.
  const double angle = static_cast<double>(pos) * pow(static_cast<double>(theta), -2.0 * i / (2.0 * half));
  table[index] = make_float2(static_cast<float>(cos(angle)), static_cast<float>(sin(angle)));
}

// direction +1: forward rotation; -1: its inverse (the transpose), for gradients.
__global__ void rope_kernel(bf16* q, bf16* k, const float2* table, RopeShape s, float direction) {
  const int half = s.head_dim / 2;
  const int heads = s.q_heads + s.kv_heads;
  const std::int64_t pairs = s.tokens * heads * half;
  for (std::int64_t index = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; index < pairs;
       index += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(index % half);
    const int head = static_cast<int>((index / half) % heads);
    const std::int64_t token = index / (static_cast<std::int64_t>(half) * heads);
    bf16* base = head < s.q_heads ? q + token * s.q_row_stride + head * s.q_head_stride
                                  : k + token * s.k_row_stride + static_cast<std::int64_t>(head - s.q_heads) * s.head_dim;
    const float2 cs = table[(token % s.seq_len) * half + i];
    const float sin_signed = direction * cs.y;
    const float x1 = to_float(base[i]), x2 = to_float(base[i + half]);
    base[i] = to_bf16(x1 * cs.x - x2 * sin_signed);
    base[i + half] = to_bf16(x2 * cs.x + x1 * sin_signed);
  }
}

// Eight pairs per thread with 16-byte accesses (half % 8 == 0, rows aligned): the same arithmetic per pair.
__global__ void rope_vec8_kernel(bf16* q, bf16* k, const float2* table, RopeShape s, float direction) {
  const int half = s.head_dim / 2, groups = half / 8;
  const int heads = s.q_heads + s.kv_heads;
  const std::int64_t count = s.tokens * heads * groups;
  for (std::int64_t index = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; index < count;
       index += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int i = 8 * static_cast<int>(index % groups);
    const int head = static_cast<int>((index / groups) % heads);
    const std::int64_t token = index / (static_cast<std::int64_t>(groups) * heads);
    bf16* base = head < s.q_heads ? q + token * s.q_row_stride + head * s.q_head_stride
                                  : k + token * s.k_row_stride + static_cast<std::int64_t>(head - s.q_heads) * s.head_dim;
    const float2* cs = table + (token % s.seq_len) * half + i;
    const Float8 x1 = load8(base, i), x2 = load8(base, i + half);
    Float8 y1, y2;
    for (int j = 0; j < 8; ++j) {
      const float sin_signed = direction * cs[j].y;
      y1.v[j] = x1.v[j] * cs[j].x - x2.v[j] * sin_signed;
      y2.v[j] = x2.v[j] * cs[j].x + x1.v[j] * sin_signed;
    }
    store8(base, i, y1);
    store8(base, i + half, y2);
  }
}

void launch_rope(bf16* q, bf16* k, const float2* table, const RopeShape& shape, float direction, cudaStream_t stream) {
  detail::require(shape.tokens > 0 && shape.seq_len > 0 && shape.head_dim > 0 && shape.head_dim % 2 == 0,
                  "rope: tokens, seq_len and an even head_dim are required");
  detail::require(shape.q_heads >= 0 && shape.kv_heads >= 0 && shape.q_heads + shape.kv_heads > 0,
                  "rope: no heads");
  RopeShape s = shape;
  if (s.q_head_stride == 0) s.q_head_stride = s.head_dim;
  if (s.q_row_stride == 0) s.q_row_stride = s.q_heads * s.q_head_stride;
  if (s.k_row_stride == 0) s.k_row_stride = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  const std::int64_t pairs = s.tokens * (s.q_heads + s.kv_heads) * (s.head_dim / 2);
  const bool vectorizable = (s.head_dim / 2) % 8 == 0 && s.q_row_stride % 8 == 0 && s.k_row_stride % 8 == 0 &&
                            s.q_head_stride % 8 == 0 &&
                            (s.q_heads == 0 || aligned16(q)) && (s.kv_heads == 0 || aligned16(k));
  if (vectorizable)
    rope_vec8_kernel<<<detail::grid_for(pairs / 8, 256), 256, 0, stream>>>(q, k, table, s, direction);
  else
    rope_kernel<<<detail::grid_for(pairs, 256), 256, 0, stream>>>(q, k, table, s, direction);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_build_table(float2* table, std::int64_t max_positions, int head_dim, float theta, cudaStream_t stream) {
  detail::require(max_positions > 0 && head_dim > 0 && head_dim % 2 == 0, "rope table: bad shape");
  const std::int64_t count = max_positions * (head_dim / 2);
  rope_table_kernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(table, max_positions, head_dim / 2,
                                                                                   theta);
  TWIN_CUDA_CHECK_LAUNCH();
}

void rope_forward(bf16* q, bf16* k, const float2* table, const RopeShape& shape, cudaStream_t stream) {
  launch_rope(q, k, table, shape, 1.f, stream);
}

void rope_backward(bf16* dq, bf16* dk, const float2* table, const RopeShape& shape, cudaStream_t stream) {
  launch_rope(dq, dk, table, shape, -1.f, stream);
}

}  // namespace twin::kernels
