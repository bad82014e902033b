// Mixture-of-experts routed rows: the stable sort of the routed copies by expert (CUB radix sort, then the
// inverse permutation and the per-expert counts, no atomics), the capacity's layout (a second sort, by expert and
// weight, then each expert's first `capacity` copies placed), the gathers that move token rows into expert
// order and back (weighted), and the combine's backward. One block per output row; rows move as 16-byte
// pieces (eight bf16) where the width and the pointers allow, else one bf16 at a time. An expert-order row of
// copy -1 is padding (zeros), a copy of row -1 was dropped (nothing of it is read or written).
#include <initializer_list>
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::Float8;
using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;
constexpr std::int64_t kMaxRows = 0x7fffffff;  // grid.x, and CUB's int item count
constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The radix sort's key bits: expert indices lie in [0, experts), so the higher bits need no passes.
int expert_bits(int experts) {
  int bits = 1;
  while ((1 << bits) < experts) ++bits;
  return bits;
}

unsigned blocks_of(std::int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// kWidth (8 or 1) bf16 at element i as floats (only v[0] when 1).
template <int kWidth>
__device__ __forceinline__ Float8 load(const bf16* p, std::int64_t i) {
  if constexpr (kWidth == 8) {
    return detail::load8(p, i);
  } else {
    Float8 x{};
    x.v[0] = to_float(p[i]);
    return x;
  }
}
template <int kWidth>
__device__ __forceinline__ void store(bf16* p, std::int64_t i, const Float8& x) {
  if constexpr (kWidth == 8)
    detail::store8(p, i, x);
  else
    p[i] = to_bf16(x.v[0]);
}

__global__ void iota_kernel(std::int32_t* values, std::int64_t count) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) values[i] = static_cast<std::int32_t>(i);
}

__global__ void invert_kernel(const std::int32_t* order, std::int32_t* routed_row, std::int64_t routed) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r < routed) routed_row[order[r]] = static_cast<std::int32_t>(r);
}

// The first position of the sorted keys (experts, or the capacity's expert-and-weight keys) holding `value` or more.
template <class Key, class Value>
__device__ std::int64_t lower_bound(const Key* sorted, std::int64_t count, Value value) {
  std::int64_t low = 0, high = count;
  while (low < high) {
    const std::int64_t mid = (low + high) / 2;
    if (sorted[mid] < value) low = mid + 1; else high = mid;
  }
  return low;
}

__global__ void count_kernel(const std::int32_t* sorted_experts, std::int64_t routed, int experts,
                             std::int32_t* counts) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e < experts)
    counts[e] = static_cast<std::int32_t>(lower_bound(sorted_experts, routed, e + 1) -
                                          lower_bound(sorted_experts, routed, e));
}

// Row r of the output copies token order[r] / top_k: an exact copy, in 16-byte pieces or single bf16; a padding
// row (order -1) is zeros.
template <int kWidth>
__global__ void permute_kernel(const bf16* in, const std::int32_t* order, int top_k, bf16* out, std::int64_t cols) {
  using Piece = std::conditional_t<kWidth == 8, uint4, bf16>;
  const std::int64_t r = blockIdx.x;
  Piece* target = reinterpret_cast<Piece*>(out + r * cols);
  if (order[r] < 0) {
    for (std::int64_t c = threadIdx.x; c < cols / kWidth; c += blockDim.x) target[c] = Piece{};
    return;
  }
  const Piece* source = reinterpret_cast<const Piece*>(in + order[r] / top_k * cols);
  for (std::int64_t c = threadIdx.x; c < cols / kWidth; c += blockDim.x) target[c] = source[c];
}

// Token t (one block) sums its top_k routed rows in j order, in fp32.
template <int kWidth>
__global__ void unpermute_kernel(const bf16* in, const std::int32_t* routed_row, const float* weight, const bf16* add,
                                 bf16* out, int top_k, std::int64_t cols) {
  const std::int64_t t = blockIdx.x;
  for (std::int64_t c = kWidth * threadIdx.x; c < cols; c += kWidth * blockDim.x) {
    Float8 sum = add != nullptr ? load<kWidth>(add, t * cols + c) : Float8{};  // read before out is written
    for (int j = 0; j < top_k; ++j) {
      const std::int64_t f = t * top_k + j;
      if (routed_row[f] < 0) continue;  // dropped by the capacity
      const float w = weight != nullptr ? weight[f] : 1.f;
      const Float8 x = load<kWidth>(in, routed_row[f] * cols + c);
      for (int k = 0; k < kWidth; ++k) sum.v[k] += w * x.v[k];
    }
    store<kWidth>(out, t * cols + c, sum);
  }
}

// Routed row r (one block), copy f = order[r] of token t: d_in[r] = w_f d_out[t], and d_weight[f] = the block's
// fixed-order fp32 dot of d_out[t] with the expert output in[routed_row[f]] (which is row r). A padding row's
// d_in is zeros.
template <int kWidth>
__global__ void unpermute_backward_kernel(const bf16* d_out, const bf16* in, const std::int32_t* order,
                                          const std::int32_t* routed_row, const float* weight, bf16* d_in,
                                          float* d_weight, int top_k, std::int64_t cols) {
  __shared__ float scratch[32];
  const std::int64_t r = blockIdx.x, f = order[r];
  if (f < 0) {  // the whole block: no block_sum below
    for (std::int64_t c = kWidth * threadIdx.x; c < cols; c += kWidth * blockDim.x) store<kWidth>(d_in, r * cols + c, {});
    return;
  }
  const std::int64_t t = f / top_k, in_row = routed_row[f];
  const float w = weight != nullptr ? weight[f] : 1.f;
  float dot = 0.f;
  for (std::int64_t c = kWidth * threadIdx.x; c < cols; c += kWidth * blockDim.x) {
    const Float8 g = load<kWidth>(d_out, t * cols + c), x = load<kWidth>(in, in_row * cols + c);
    Float8 d{};
    for (int k = 0; k < kWidth; ++k) {
      d.v[k] = w * g.v[k];
      dot += g.v[k] * x.v[k];
    }
    store<kWidth>(d_in, r * cols + c, d);
  }
  dot = detail::block_sum(dot, scratch);
  if (threadIdx.x == 0) d_weight[f] = dot;
}

// The capacity's sort key of copy i: its expert above, then its weight descending (a non-negative float's bits
// order as its value), so that a stable sort keeps the lower copy first among equal weights.
__global__ void capacity_keys_kernel(const std::int32_t* expert_index, const float* weight, std::uint64_t* keys,
                                     std::int32_t* copies, std::int64_t routed) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= routed) return;
  const float w = weight[i];
  const std::uint32_t bits = w > 0.f ? __float_as_uint(w) : 0u;
  keys[i] = static_cast<std::uint64_t>(expert_index[i]) << 32 | (0xffffffffu - bits);
  copies[i] = static_cast<std::int32_t>(i);
}

// One block: each expert's first sorted copy and its first output row (the rows of the experts before it: each
// keeps min(copies, capacity), or exactly capacity when padded).
__global__ void capacity_starts_kernel(const std::uint64_t* sorted_keys, std::int64_t routed, int experts,
                                       std::int64_t capacity, bool pad, std::int32_t* segment_start,
                                       std::int32_t* row_start) {
  __shared__ std::int32_t kept[kMoeMaxExperts];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    const std::int64_t first = lower_bound(sorted_keys, routed, static_cast<std::uint64_t>(e) << 32);
    const std::int64_t end = lower_bound(sorted_keys, routed, static_cast<std::uint64_t>(e + 1) << 32);
    segment_start[e] = static_cast<std::int32_t>(first);
    kept[e] = static_cast<std::int32_t>(pad || end - first > capacity ? capacity : end - first);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  std::int32_t row = 0;  // at most experts x capacity <= routed x experts < 2^31 rows (the caller checked)
  for (int e = 0; e < experts; ++e) {
    row_start[e] = row;
    row += kept[e];
  }
}

// Sorted position r: the copy's place among its expert's copies; kept within the capacity at its expert's rows.
__global__ void capacity_place_kernel(const std::uint64_t* sorted_keys, const std::int32_t* sorted_copies,
                                      std::int64_t routed, const std::int32_t* segment_start,
                                      const std::int32_t* row_start, std::int64_t capacity, std::int32_t* order,
                                      std::int32_t* routed_row) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= routed) return;
  const auto e = static_cast<int>(sorted_keys[r] >> 32);
  const std::int64_t place = r - segment_start[e];
  const std::int32_t f = sorted_copies[r];
  if (place >= capacity) {
    routed_row[f] = -1;
    return;
  }
  const auto row = static_cast<std::int32_t>(row_start[e] + place);
  order[row] = f;
  routed_row[f] = row;
}

std::size_t capacity_sort_temp_bytes(std::int64_t routed, int experts) {
  std::size_t bytes = 0;
  TWIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::uint64_t*>(nullptr),
                                                  static_cast<std::uint64_t*>(nullptr),
                                                  static_cast<const std::int32_t*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr), static_cast<int>(routed), 0,
                                                  32 + expert_bits(experts)));
  return bytes;
}

std::size_t sort_temp_bytes(std::int64_t routed, int experts) {
  std::size_t bytes = 0;
  TWIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr),
                                                  static_cast<const std::int32_t*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr), static_cast<int>(routed), 0,
                                                  expert_bits(experts)));
  return bytes;
}

void require_rows(std::int64_t rows, int top_k, std::int64_t cols, const char* what) {
  detail::require(rows > 0 && rows <= kMaxRows && cols > 0 && top_k >= 1 && top_k <= kMoeMaxTopK, what);
}

bool vector_rows(std::int64_t cols, std::initializer_list<const void*> rows) {
  if (cols % 8 != 0) return false;
  for (const void* p : rows)
    if (!detail::aligned16(p)) return false;
  return true;
}

}  // namespace

std::size_t moe_sort_workspace_bytes(std::int64_t routed, int experts) {
  detail::require(routed > 0 && routed <= kMaxRows && experts > 0 && experts <= kMoeMaxExperts,
                  "moe_sort_by_expert: need 0 < routed < 2^31 and 1 <= experts <= 1024");
  return 2 * aligned(static_cast<std::size_t>(routed) * sizeof(std::int32_t)) +
         aligned(sort_temp_bytes(routed, experts));
}

void moe_sort_by_expert(const std::int32_t* expert_index, std::int64_t routed, int experts, std::int32_t* order,
                        std::int32_t* routed_row, std::int32_t* counts, void* workspace, std::size_t workspace_bytes,
                        cudaStream_t stream) {
  detail::require(workspace_bytes >= moe_sort_workspace_bytes(routed, experts),
                  "moe_sort_by_expert: workspace too small");
  const std::size_t array = aligned(static_cast<std::size_t>(routed) * sizeof(std::int32_t));
  auto* bytes = static_cast<std::uint8_t*>(workspace);
  auto* copies = reinterpret_cast<std::int32_t*>(bytes);
  auto* sorted_experts = reinterpret_cast<std::int32_t*>(bytes + array);
  std::size_t temp_bytes = workspace_bytes - 2 * array;
  iota_kernel<<<blocks_of(routed), kThreads, 0, stream>>>(copies, routed);
  TWIN_CUDA_CHECK_LAUNCH();
  // A radix sort is stable: within an expert the copies keep their increasing f.
  TWIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(bytes + 2 * array, temp_bytes, expert_index, sorted_experts, copies,
                                                  order, static_cast<int>(routed), 0, expert_bits(experts), stream));
  invert_kernel<<<blocks_of(routed), kThreads, 0, stream>>>(order, routed_row, routed);
  TWIN_CUDA_CHECK_LAUNCH();
  count_kernel<<<blocks_of(experts), kThreads, 0, stream>>>(sorted_experts, routed, experts, counts);
  TWIN_CUDA_CHECK_LAUNCH();
}

std::size_t moe_capacity_workspace_bytes(std::int64_t routed, int experts) {
  detail::require(routed > 0 && routed <= kMaxRows && experts > 0 && experts <= kMoeMaxExperts,
                  "moe_capacity_layout: need 0 < routed < 2^31 and 1 <= experts <= 1024");
  const std::size_t copies = static_cast<std::size_t>(routed);
  return 2 * aligned(copies * sizeof(std::uint64_t)) + 2 * aligned(copies * sizeof(std::int32_t)) +
         2 * aligned(static_cast<std::size_t>(experts) * sizeof(std::int32_t)) +
         aligned(capacity_sort_temp_bytes(routed, experts));
}

void moe_capacity_layout(const std::int32_t* expert_index, const float* expert_weight, std::int64_t routed,
                         int experts, std::int64_t capacity, bool pad, std::int32_t* order, std::int64_t rows,
                         std::int32_t* routed_row, void* workspace, std::size_t workspace_bytes,
                         cudaStream_t stream) {
  detail::require(workspace_bytes >= moe_capacity_workspace_bytes(routed, experts),
                  "moe_capacity_layout: workspace too small");
  detail::require(capacity > 0 && capacity <= routed && rows >= 0 && rows <= kMaxRows &&
                      rows <= (pad ? experts * capacity : routed),
                  "moe_capacity_layout: need 0 < capacity <= routed and rows within the kept copies");
  const std::size_t copies = static_cast<std::size_t>(routed);
  auto* bytes = static_cast<std::uint8_t*>(workspace);
  auto* keys = reinterpret_cast<std::uint64_t*>(bytes);
  auto* sorted_keys = reinterpret_cast<std::uint64_t*>(bytes + aligned(copies * 8));
  auto* values = reinterpret_cast<std::int32_t*>(bytes + 2 * aligned(copies * 8));
  auto* sorted_values = reinterpret_cast<std::int32_t*>(bytes + 2 * aligned(copies * 8) + aligned(copies * 4));
  std::uint8_t* tail = bytes + 2 * aligned(copies * 8) + 2 * aligned(copies * 4);
  auto* segment_start = reinterpret_cast<std::int32_t*>(tail);
  auto* row_start = reinterpret_cast<std::int32_t*>(tail + aligned(static_cast<std::size_t>(experts) * 4));
  std::uint8_t* temp = tail + 2 * aligned(static_cast<std::size_t>(experts) * 4);
  std::size_t temp_bytes = workspace_bytes - static_cast<std::size_t>(temp - bytes);
  capacity_keys_kernel<<<blocks_of(routed), kThreads, 0, stream>>>(expert_index, expert_weight, keys, values, routed);
  TWIN_CUDA_CHECK_LAUNCH();
  TWIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, sorted_keys, values, sorted_values,
                                                  static_cast<int>(routed), 0, 32 + expert_bits(experts), stream));
  capacity_starts_kernel<<<1, kThreads, 0, stream>>>(sorted_keys, routed, experts, capacity, pad, segment_start,
                                                      row_start);
  TWIN_CUDA_CHECK_LAUNCH();
  if (rows > 0)  // padding rows stay -1
    TWIN_CUDA_CHECK(cudaMemsetAsync(order, 0xff, static_cast<std::size_t>(rows) * sizeof(std::int32_t), stream));
  capacity_place_kernel<<<blocks_of(routed), kThreads, 0, stream>>>(sorted_keys, sorted_values, routed, segment_start,
                                                                     row_start, capacity, order, routed_row);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_permute(const bf16* in, const std::int32_t* order, int top_k, bf16* out, std::int64_t routed,
                 std::int64_t cols, cudaStream_t stream) {
  require_rows(routed, top_k, cols, "moe_permute: need 0 < routed < 2^31, cols > 0, 1 <= top_k <= 8");
  const auto grid = static_cast<unsigned>(routed);
  if (vector_rows(cols, {in, out}))
    permute_kernel<8><<<grid, kThreads, 0, stream>>>(in, order, top_k, out, cols);
  else
    permute_kernel<1><<<grid, kThreads, 0, stream>>>(in, order, top_k, out, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_unpermute(const bf16* in, const std::int32_t* routed_row, const float* weight, const bf16* add, bf16* out,
                   std::int64_t tokens, int top_k, std::int64_t cols, cudaStream_t stream) {
  require_rows(tokens, top_k, cols, "moe_unpermute: need 0 < tokens < 2^31, cols > 0, 1 <= top_k <= 8");
  const auto grid = static_cast<unsigned>(tokens);
  if (vector_rows(cols, {in, out}) && (add == nullptr || vector_rows(cols, {add})))
    unpermute_kernel<8><<<grid, kThreads, 0, stream>>>(in, routed_row, weight, add, out, top_k, cols);
  else
    unpermute_kernel<1><<<grid, kThreads, 0, stream>>>(in, routed_row, weight, add, out, top_k, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_unpermute_backward(const bf16* d_out, const bf16* in, const std::int32_t* order,
                            const std::int32_t* routed_row, const float* weight, bf16* d_in, float* d_weight,
                            std::int64_t rows, int top_k, std::int64_t cols, cudaStream_t stream) {
  require_rows(rows, top_k, cols, "moe_unpermute_backward: need 0 < rows < 2^31, cols > 0, 1 <= top_k <= 8");
  const auto grid = static_cast<unsigned>(rows);
  if (vector_rows(cols, {d_out, in, d_in}))
    unpermute_backward_kernel<8><<<grid, kThreads, 0, stream>>>(d_out, in, order, routed_row, weight, d_in, d_weight,
                                                                top_k, cols);
  else
    unpermute_backward_kernel<1><<<grid, kThreads, 0, stream>>>(d_out, in, order, routed_row, weight, d_in, d_weight,
                                                                top_k, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
