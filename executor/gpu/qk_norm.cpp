// Two launches of the norm entry over strided row groups (kernels::NormRowLayout): a token's query heads are
// `heads` contiguous rows of head_dim, the next token's `qkv_width` elements on; its key heads start heads x
// head_dim after them. The saved copy packs a token's heads without the values between them.
#include "executor/gpu/qk_norm.hpp"

#include <stdexcept>

#include "gpu/checks.hpp"

namespace twin::exec {
namespace {

// The query heads (part 0) or the key heads (part 1): their first element in a row, their count.
struct HeadPart {
  std::int64_t first_column, heads;
};
HeadPart head_part(const QkNormShape& s, int part) {
  return part == 0 ? HeadPart{0, s.heads} : HeadPart{s.heads * s.head_dim, s.groups};
}

void check(const QkNormShape& s) {
  if (s.tokens <= 0 || s.heads <= 0 || s.groups <= 0 || s.head_dim <= 0 ||
      s.qkv_width < (s.heads + 2 * s.groups) * s.head_dim)
    throw std::invalid_argument("QK-norm: a shape of positive tokens, heads and head_dim within the QKV row");
}

}  // namespace

std::array<gpu::NormForward, 2> qk_norm_forward_calls(gpu::bf16* qkv, const gpu::bf16* weights, float* rstd,
                                                      const QkNormShape& s) {
  check(s);
  std::array<gpu::NormForward, 2> calls;
  for (int part = 0; part < 2; ++part) {
    const HeadPart h = head_part(s, part);
    gpu::NormForward& c = calls[part];
    c.normalization = Normalization::rmsnorm;
    c.x = c.y = qkv + h.first_column;
    c.weight = weights + part * s.head_dim;
    c.rstd = rstd + (part == 0 ? 0 : s.tokens * s.heads);
    c.rows = s.tokens * h.heads;
    c.cols = s.head_dim;
    c.layout = {h.heads, s.qkv_width};
  }
  return calls;
}

std::array<gpu::NormBackward, 2> qk_norm_backward_calls(gpu::bf16* d_qkv, const gpu::bf16* saved,
                                                        const gpu::bf16* weights, const float* rstd, float* partials,
                                                        gpu::bf16* weight_grads, bool accumulate,
                                                        const QkNormShape& s) {
  check(s);
  std::array<gpu::NormBackward, 2> calls;
  for (int part = 0; part < 2; ++part) {
    const HeadPart h = head_part(s, part);
    gpu::NormBackward& c = calls[part];
    c.normalization = Normalization::rmsnorm;
    c.dy = c.dx = d_qkv + h.first_column;
    c.x = saved + h.first_column;
    c.weight = weights + part * s.head_dim;
    c.rstd = rstd + (part == 0 ? 0 : s.tokens * s.heads);
    c.partials = partials;  // the two launches share it: stream-ordered, each reduced before the next writes
    c.weight_grad = weight_grads + part * s.head_dim;
    c.accumulate = accumulate;
    c.rows = s.tokens * h.heads;
    c.cols = s.head_dim;
    c.x_layout = {h.heads, s.saved_width()};
    c.grad_layout = {h.heads, s.qkv_width};
  }
  return calls;
}

void save_query_and_key(const gpu::bf16* qkv, gpu::bf16* saved, const QkNormShape& s, cudaStream_t stream) {
  check(s);
  const std::size_t row_bytes = static_cast<std::size_t>(s.saved_width()) * sizeof(gpu::bf16);
  TWIN_CUDA_CHECK(cudaMemcpy2DAsync(saved, row_bytes, qkv, static_cast<std::size_t>(s.qkv_width) * sizeof(gpu::bf16),
                                    row_bytes, static_cast<std::size_t>(s.tokens), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace twin::exec
