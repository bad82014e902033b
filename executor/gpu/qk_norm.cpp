// One launch of the norm entry over strided row groups (kernels::NormRowLayout) with two weights
// (kernels::NormWeightRows): a token's query and key heads are heads + groups contiguous rows of head_dim, the next
// token's `qkv_width` elements on; the first `heads` rows of each take q_norm's weight, the rest k_norm's. The saved
// copy packs a token's heads without the values after them.
#include "executor/gpu/qk_norm.hpp"

#include <stdexcept>

#include "gpu/checks.hpp"

namespace twin::exec {
namespace {

void check(const QkNormShape& s) {
  if (s.tokens <= 0 || s.heads <= 0 || s.groups <= 0 || s.head_dim <= 0 ||
      s.qkv_width < (s.heads + 2 * s.groups) * s.head_dim)
    throw std::invalid_argument("QK-norm: a shape of positive tokens, heads and head_dim within the QKV row");
}

kernels::NormWeightRows query_then_key(const QkNormShape& s) { return {s.heads + s.groups, s.heads}; }

}  // namespace

gpu::NormForward qk_norm_forward_call(gpu::bf16* qkv, const gpu::bf16* weights, float* rstd, const QkNormShape& s) {
  check(s);
  gpu::NormForward c;
  c.normalization = Normalization::rmsnorm;
  c.x = c.y = qkv;
  c.weight = weights;
  c.rstd = rstd;
  c.rows = s.rows();
  c.cols = s.head_dim;
  c.layout = {s.heads + s.groups, s.qkv_width};
  c.weights = query_then_key(s);
  return c;
}

gpu::NormBackward qk_norm_backward_call(gpu::bf16* d_qkv, const gpu::bf16* saved, const gpu::bf16* weights,
                                        const float* rstd, float* partials, kernels::GradRef weight_grads, bool accumulate,
                                        const QkNormShape& s) {
  check(s);
  gpu::NormBackward c;
  c.normalization = Normalization::rmsnorm;
  c.dy = c.dx = d_qkv;
  c.x = saved;
  c.weight = weights;
  c.rstd = rstd;
  c.partials = partials;
  c.weight_grad = weight_grads;
  c.accumulate = accumulate;
  c.rows = s.rows();
  c.cols = s.head_dim;
  c.x_layout = {};  // the saved heads: contiguous rows
  c.grad_layout = {s.heads + s.groups, s.qkv_width};
  c.weights = query_then_key(s);
  return c;
}

std::size_t qk_norm_partial_floats(const QkNormShape& s) {
  return kernels::norm_partial_floats(s.rows(), query_then_key(s).weight_count() * s.head_dim);
}

void save_query_and_key(const gpu::bf16* qkv, gpu::bf16* saved, const QkNormShape& s, cudaStream_t stream) {
  check(s);
  const std::size_t row_bytes = static_cast<std::size_t>(s.saved_width()) * sizeof(gpu::bf16);
  TWIN_CUDA_CHECK(cudaMemcpy2DAsync(saved, row_bytes, qkv, static_cast<std::size_t>(s.qkv_width) * sizeof(gpu::bf16),
                                    row_bytes, static_cast<std::size_t>(s.tokens), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace twin::exec
