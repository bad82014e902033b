// Vocab-parallel embedding. Backward avoids floating-point atomics (whose order, and so whose result
// bits, vary run to run): positions are sorted by token with CUB, and the block at the start of each
// run of equal tokens sums that run in position order.
#include <cub/device/device_radix_sort.cuh>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::Float8;
using detail::load8;
using detail::store8;
using detail::to_bf16;
using detail::to_float;
using detail::from_float;

constexpr int kThreads = 256;
constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

template <bool kVector>
__global__ void embedding_forward_kernel(const std::int32_t* tokens, const bf16* table, bf16* out, std::int64_t hidden,
                                         std::int64_t vocab_start, std::int64_t vocab_rows) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t row = static_cast<std::int64_t>(tokens[t]) - vocab_start;
  const bool mine = row >= 0 && row < vocab_rows;
  if constexpr (kVector) {  // eight bf16 per access
    for (std::int64_t c = 8 * threadIdx.x; c < hidden; c += 8 * blockDim.x)
      *reinterpret_cast<uint4*>(out + t * hidden + c) =
          mine ? *reinterpret_cast<const uint4*>(table + row * hidden + c) : make_uint4(0, 0, 0, 0);
  } else {
    for (std::int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
      out[t * hidden + c] = mine ? table[row * hidden + c] : to_bf16(0.f);
  }
}

__global__ void iota_kernel(std::int32_t* values, std::int64_t count) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) values[i] = static_cast<std::int32_t>(i);
}

// The block at the start of each run of equal (sorted) tokens sums the run's dy rows in position order; with
// kVector each thread takes eight columns (16-byte loads and stores, two of them for an fp32 gradient). The run's
// fp32 sum is added to the gradient row once: grad = G(grad + sum).
template <bool kVector, typename G>
__global__ void embedding_backward_kernel(const std::int32_t* sorted_tokens, const std::int32_t* sorted_positions,
                                          const bf16* dy, G* grad, std::int64_t token_count, std::int64_t hidden,
                                          std::int64_t vocab_start, std::int64_t vocab_rows) {
  const std::int64_t first = blockIdx.x;
  const std::int32_t token = sorted_tokens[first];
  if (first > 0 && sorted_tokens[first - 1] == token) return;  // not the start of a run
  const std::int64_t row = static_cast<std::int64_t>(token) - vocab_start;
  if (row < 0 || row >= vocab_rows) return;
  std::int64_t end = first + 1;
  while (end < token_count && sorted_tokens[end] == token) ++end;
  if constexpr (kVector) {
    for (std::int64_t c = 8 * threadIdx.x; c < hidden; c += 8 * blockDim.x) {
      float sum[8] = {};
      for (std::int64_t j = first; j < end; ++j) {
        const Float8 v = load8(dy, static_cast<std::int64_t>(sorted_positions[j]) * hidden + c);
        for (int k = 0; k < 8; ++k) sum[k] += v.v[k];
      }
      Float8 g = load8(grad, row * hidden + c);
      for (int k = 0; k < 8; ++k) g.v[k] += sum[k];
      store8(grad, row * hidden + c, g);
    }
  } else {
    for (std::int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      float sum = 0.f;
      for (std::int64_t j = first; j < end; ++j)
        sum += to_float(dy[static_cast<std::int64_t>(sorted_positions[j]) * hidden + c]);
      grad[row * hidden + c] = from_float<G>(to_float(grad[row * hidden + c]) + sum);
    }
  }
}

// The eight-wide kernel where the width and both pointers allow, else the scalar one.
template <typename G>
void launch_backward(const std::int32_t* sorted_tokens, const std::int32_t* sorted_positions, const bf16* dy, G* grad,
                     std::int64_t token_count, std::int64_t hidden, std::int64_t vocab_start, std::int64_t vocab_rows,
                     cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(token_count);
  if (hidden % 8 == 0 && detail::aligned16(dy) && detail::aligned16(grad))
    embedding_backward_kernel<true><<<grid, kThreads, 0, stream>>>(sorted_tokens, sorted_positions, dy, grad,
                                                                   token_count, hidden, vocab_start, vocab_rows);
  else
    embedding_backward_kernel<false><<<grid, kThreads, 0, stream>>>(sorted_tokens, sorted_positions, dy, grad,
                                                                    token_count, hidden, vocab_start, vocab_rows);
}

std::size_t sort_temp_bytes(std::int64_t token_count) {
  std::size_t bytes = 0;
  TWIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr),
                                                  static_cast<const std::int32_t*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr), static_cast<int>(token_count)));
  return bytes;
}

}  // namespace

void embedding_forward(const std::int32_t* tokens, const bf16* table, bf16* out, std::int64_t token_count,
                       std::int64_t hidden, std::int64_t vocab_start, std::int64_t vocab_rows, cudaStream_t stream) {
  detail::require(token_count > 0 && token_count <= 0x7fffffff && hidden > 0, "embedding: bad shape");
  const auto grid = static_cast<unsigned>(token_count);
  if (hidden % 8 == 0 && detail::aligned16(table) && detail::aligned16(out))
    embedding_forward_kernel<true><<<grid, kThreads, 0, stream>>>(tokens, table, out, hidden, vocab_start, vocab_rows);
  else
    embedding_forward_kernel<false><<<grid, kThreads, 0, stream>>>(tokens, table, out, hidden, vocab_start, vocab_rows);
  TWIN_CUDA_CHECK_LAUNCH();
}

std::size_t embedding_backward_workspace_bytes(std::int64_t token_count) {
  const std::size_t array = aligned(static_cast<std::size_t>(token_count) * sizeof(std::int32_t));
  return 3 * array + aligned(sort_temp_bytes(token_count));
}

void embedding_backward(const std::int32_t* tokens, const bf16* dy, GradRef grad, void* workspace,
                        std::size_t workspace_bytes, std::int64_t token_count, std::int64_t hidden,
                        std::int64_t vocab_start, std::int64_t vocab_rows, cudaStream_t stream) {
  detail::require(token_count > 0 && token_count <= 0x7fffffff && hidden > 0, "embedding: bad shape");
  detail::require(workspace_bytes >= embedding_backward_workspace_bytes(token_count),
                  "embedding backward: workspace too small");
  const std::size_t array = aligned(static_cast<std::size_t>(token_count) * sizeof(std::int32_t));
  auto* bytes = static_cast<std::uint8_t*>(workspace);
  auto* positions = reinterpret_cast<std::int32_t*>(bytes);
  auto* sorted_tokens = reinterpret_cast<std::int32_t*>(bytes + array);
  auto* sorted_positions = reinterpret_cast<std::int32_t*>(bytes + 2 * array);
  void* temp = bytes + 3 * array;
  std::size_t temp_bytes = workspace_bytes - 3 * array;
  iota_kernel<<<static_cast<unsigned>((token_count + kThreads - 1) / kThreads), kThreads, 0, stream>>>(positions,
                                                                                                      token_count);
  TWIN_CUDA_CHECK_LAUNCH();
  TWIN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens, positions, sorted_positions,
                                                  static_cast<int>(token_count), 0, 32, stream));
  switch (grad.type) {
    case GradType::bf16:
      launch_backward(sorted_tokens, sorted_positions, dy, static_cast<bf16*>(grad.data), token_count, hidden,
                      vocab_start, vocab_rows, stream);
      break;
    case GradType::f32:
      launch_backward(sorted_tokens, sorted_positions, dy, static_cast<float*>(grad.data), token_count, hidden,
                      vocab_start, vocab_rows, stream);
      break;
  }
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
