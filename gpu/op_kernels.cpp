// Each entry's kernels, in the order the executor ran them before the entries existed (behaviour unchanged).
#include "gpu/op_kernels.hpp"

#include <stdexcept>

#include "gpu/attention.hpp"
#include "gpu/checks.hpp"
#include "gpu/unfused_kernels.hpp"

namespace twin::gpu {

namespace k = twin::kernels;

namespace {
void require_contiguous_rows(const k::NormRowLayout& layout, const k::NormWeightRows& weights) {
  if (layout.group_rows != 0 || weights.period != 0)
    throw std::invalid_argument("LayerNorm runs on contiguous rows with one weight only");
}
}  // namespace

void launch(const NormForward& c, cudaStream_t stream) {
  switch (c.normalization) {
    case Normalization::rmsnorm:
      return k::rmsnorm_forward(c.x, c.weight, c.y, c.rstd, c.rows, c.cols, 1e-5f, c.layout, c.weights, stream);
    case Normalization::layernorm:
      require_contiguous_rows(c.layout, c.weights);
      return k::layernorm_forward(c.x, c.weight, c.bias, c.y, c.mean, c.rstd, c.rows, c.cols, 1e-5f, stream);
  }
}

void launch(const NormBackward& c, cudaStream_t stream) {
  const std::int64_t blocks = k::norm_partial_blocks(c.rows);
  switch (c.normalization) {
    case Normalization::rmsnorm:
      k::rmsnorm_backward(c.dy, c.x, c.weight, c.rstd, c.skip, c.dx, c.partials, c.rows, c.cols, c.x_layout,
                          c.grad_layout, c.weights, stream);
      // Both weights' columns in one reduction: the partials hold them side by side, as weight_grad does.
      k::norm_weight_grad_reduce(c.partials, blocks, c.weights.weight_count() * c.cols, c.weight_grad, c.accumulate,
                                 stream);
      return;
    case Normalization::layernorm:  // weight partials, then bias partials
      require_contiguous_rows(c.x_layout, c.weights);
      require_contiguous_rows(c.grad_layout, c.weights);
      k::layernorm_backward(c.dy, c.x, c.weight, c.mean, c.rstd, c.dx, c.partials, c.rows, c.cols, stream);
      if (c.skip) k::residual_add(c.dx, c.skip, c.dx, c.rows * c.cols, stream);
      k::norm_weight_grad_reduce(c.partials, blocks, c.cols, c.weight_grad, c.accumulate, stream);
      k::norm_weight_grad_reduce(c.partials + blocks * c.cols, blocks, c.cols, c.bias_grad, c.accumulate, stream);
      return;
  }
}

void launch(const RopeForward& c, cudaStream_t stream) { k::rope_forward(c.q, c.k, c.table, c.shape, stream); }
void launch(const RopeBackward& c, cudaStream_t stream) { k::rope_backward(c.dq, c.dk, c.table, c.shape, stream); }

kernels::GluTerms glu_terms(double glu_linear_offset, double activation_func_clamp_value) {
  return {static_cast<float>(glu_linear_offset), static_cast<float>(activation_func_clamp_value)};
}

void launch(const ActivationForward& c, cudaStream_t stream) {
  switch (c.activation) {
    case Activation::swiglu: return k::swiglu_forward(c.fc1, c.out, c.rows, c.cols, stream);
    case Activation::geglu: return k::geglu_forward(c.fc1, c.out, c.rows, c.cols, stream);
    case Activation::quick_geglu: return k::quick_geglu_forward(c.fc1, c.out, c.rows, c.cols, c.glu, stream);
    case Activation::gelu: return k::gelu_forward(c.fc1, c.out, c.rows * c.cols, stream);
    case Activation::squared_relu: return k::squared_relu_forward(c.fc1, c.out, c.rows * c.cols, stream);
  }
}
void launch(const ActivationBackward& c, cudaStream_t stream) {
  switch (c.activation) {
    case Activation::swiglu: return k::swiglu_backward(c.fc1, c.d_out, c.d_fc1, c.rows, c.cols, stream);
    case Activation::geglu: return k::geglu_backward(c.fc1, c.d_out, c.d_fc1, c.rows, c.cols, stream);
    case Activation::quick_geglu:
      return k::quick_geglu_backward(c.fc1, c.d_out, c.d_fc1, c.rows, c.cols, c.glu, stream);
    case Activation::gelu: return k::gelu_backward(c.fc1, c.d_out, c.d_fc1, c.rows * c.cols, stream);
    case Activation::squared_relu: return k::squared_relu_backward(c.fc1, c.d_out, c.d_fc1, c.rows * c.cols, stream);
  }
}

namespace {
// The forward's dropout over its runs: out = residual + mask * x / (1 - p) (no residual: in place on x).
void dropout_forward(const HiddenDropout& d, const bf16* residual, const bf16* x, bf16* out, std::int64_t cols,
                     cudaStream_t stream) {
  if (d.run_count <= 0 || d.runs == nullptr) throw std::invalid_argument("hidden dropout: no rows to draw for");
  for (int r = 0; r < d.run_count; ++r) k::dropout_add_forward(residual, x, out, d.mask, cols, d.runs[r], d.draw, stream);
}
}  // namespace

void launch(const Elementwise& c, cudaStream_t stream) {
  if (c.gradient) {
    if (c.a || c.out || c.dropout.active())
      throw std::logic_error("gpu::Elementwise: a gradient add with a, out or dropout");
    return k::add_to_gradient(c.b, c.gradient, c.count, stream);
  }
  if (!c.dropout.active()) return k::residual_add(c.a, c.b, c.out, c.count, stream);
  if (c.dropped == nullptr) return dropout_forward(c.dropout, c.a, c.b, c.out, c.cols, stream);
  if (c.b != nullptr) k::residual_add(c.a, c.b, c.out, c.count, stream);
  k::dropout_backward(c.b != nullptr ? c.out : c.a, c.dropout.mask, c.dropped, c.count, c.dropout.draw.probability,
                      stream);
}

void launch(const EmbeddingForward& c, cudaStream_t stream) {
  k::embedding_forward(c.tokens, c.table, c.out, c.rows, c.cols, c.vocab_start, c.vocab_rows, stream);
  if (c.positions)
    for (int r = 0; r < c.position_run_count; ++r)
      k::position_embedding_forward(c.out, c.positions, c.position_runs[r], c.cols, stream);
  if (c.dropout.active()) dropout_forward(c.dropout, nullptr, c.out, c.out, c.cols, stream);
}
void launch(const EmbeddingBackward& c, cudaStream_t stream) {
  const bf16* dy = c.dy;
  if (c.dropout.active()) {
    if (c.dropped_dy == nullptr) throw std::invalid_argument("embedding backward: dropout without a dropped_dy");
    k::dropout_backward(c.dy, c.dropout.mask, c.dropped_dy, c.rows * c.cols, c.dropout.draw.probability, stream);
    dy = c.dropped_dy;
  }
  // Rows no token of the step names keep the zeros the step's first backward starts from.
  if (c.starts_gradient)
    TWIN_CUDA_CHECK(cudaMemsetAsync(
        c.grad.data, 0, static_cast<std::size_t>(c.vocab_rows * c.cols) * c.grad.element_bytes(), stream));
  k::embedding_backward(c.tokens, dy, c.grad, c.workspace, c.workspace_bytes, c.rows, c.cols, c.vocab_start,
                        c.vocab_rows, stream);
  if (!c.position_grad) return;
  if (c.starts_position_gradient)
    TWIN_CUDA_CHECK(cudaMemsetAsync(c.position_grad.data, 0,
                                    static_cast<std::size_t>(c.position_rows * c.cols) * c.position_grad.element_bytes(),
                                    stream));
  const bf16* position_dy = c.position_dy == c.dy ? dy : c.position_dy;
  for (int r = 0; r < c.position_run_count; ++r)
    k::position_embedding_backward(position_dy, c.position_grad, c.position_runs[r], c.cols, stream);
}

namespace {

// Megatron-LM's cross-entropy without fusion over the whole vocabulary (core/unfused_loss.hpp's passes).
void launch_unfused(const LossForward& c, cudaStream_t stream) {
  if (c.softcap > 0 || !c.token_loss) throw std::logic_error("gpu: an unfused loss with capped logits or no loss");
  const std::int64_t logits = c.rows * c.vocab_rows;
  k::bf16_to_f32(c.logits, c.fp32_logits, logits, stream);
  k::rows_max_f32(c.fp32_logits, c.row_max, c.rows, c.vocab_rows, stream);
  k::subtract_rows_gather_target_f32(c.fp32_logits, c.row_max, c.targets, c.target_logit, c.rows, c.vocab_rows,
                                     c.vocab_start, stream);
  k::exp_f32(c.fp32_logits, logits, stream);
  k::rows_sum_f32(c.fp32_logits, c.sum_exp, c.rows, c.vocab_rows, stream);
  k::softmax_divide_loss_f32(c.fp32_logits, c.sum_exp, c.target_logit, c.token_loss, c.rows, c.vocab_rows, stream);
  if (c.loss_sum) k::add_sum_f32(c.token_loss, c.rows, c.loss_sum, stream);
}

}  // namespace

void launch(const LossForward& c, cudaStream_t stream) {
  if (c.fp32_logits) return launch_unfused(c, stream);
  k::cross_entropy_local_stats(c.logits, c.targets, c.row_max, c.sum_exp, c.target_logit, c.rows, c.vocab_rows,
                               c.vocab_start, c.softcap, stream);
  if (!c.token_loss) return;
  k::cross_entropy_loss(c.row_max, c.sum_exp, c.target_logit, c.token_loss, c.rows, stream);
  if (c.loss_sum) k::add_sum_f32(c.token_loss, c.rows, c.loss_sum, stream);
}
void launch(const LossBackward& c, cudaStream_t stream) {
  if (c.fp32_softmax) {
    if (c.softcap > 0) throw std::logic_error("gpu: an unfused loss with capped logits");
    k::softmax_minus_onehot_f32(c.fp32_softmax, c.targets, c.rows, c.vocab_rows, c.vocab_start, c.scale, stream);
    k::f32_to_bf16(c.fp32_softmax, c.d_logits, c.rows * c.vocab_rows, stream);
    return;
  }
  k::cross_entropy_backward(c.logits, c.row_max, c.sum_exp, c.targets, c.d_logits, c.rows, c.vocab_rows,
                            c.vocab_start, c.scale, c.softcap, stream);
}

void launch(const MoePermute& c, cudaStream_t stream) {
  if (c.backward)
    k::moe_unpermute(c.in, c.routed_row, nullptr, nullptr, c.out, c.tokens, c.top_k, c.cols, stream);
  else
    k::moe_permute(c.in, c.order, c.top_k, c.out, c.rows > 0 ? c.rows : c.tokens * c.top_k, c.cols, stream);
}
void launch(const MoeUnpermute& c, cudaStream_t stream) {
  if (c.backward)
    k::moe_unpermute_backward(c.d_out, c.in, c.order, c.routed_row, c.weight, c.d_in, c.d_weight,
                              c.rows > 0 ? c.rows : c.tokens * c.top_k, c.top_k, c.cols, stream);
  else
    k::moe_unpermute(c.in, c.routed_row, c.weight, c.add, c.out, c.tokens, c.top_k, c.cols, stream);
}

void launch(const OptimizerStep& c, cudaStream_t stream) {
  k::adamw_step(c.state, c.grad, c.param, c.count, c.params, c.clip_scale, stream);
}

void launch(const Fp8Cast& c, cudaStream_t stream) {
  switch (c.recipe) {
    case Fp8Recipe::tensorwise:
      if (c.amax_reduced)
        return k::fp8_cast_from_amax_partials(c.x, c.rows, c.cols, c.type, c.rowwise, c.columnwise, c.scaling, stream);
      return k::fp8_cast_current_scaling(c.x, c.rows, c.cols, c.type, c.rowwise, c.columnwise, c.scaling, stream);
    case Fp8Recipe::delayed:
      if (c.delayed_state == nullptr) throw std::logic_error("gpu::Fp8Cast: a delayed-scaling cast without its state");
      return k::fp8_cast_delayed_scaling(c.x, c.rows, c.cols, c.type, c.rowwise, c.columnwise, c.scaling,
                                         c.delayed_state, c.history_len, c.cast_index, stream, c.reduced_amax);
    case Fp8Recipe::blockwise:
      return k::fp8_cast_blockwise(c.x, c.rows, c.cols, c.type, c.blocks, c.rowwise, c.scaling, c.columnwise,
                                   c.columnwise_scaling, stream);
    case Fp8Recipe::mxfp8: break;
  }
  throw std::logic_error("gpu::Fp8Cast: no cast kernel of recipe " + to_string(c.recipe));
}

void launch(const Fp8Transpose& c, cudaStream_t stream) {
  k::fp8_transpose(c.rowwise, c.rows, c.cols, c.columnwise, stream);
}

kernels::Fp8Scaling fp8_cast_blocks(Fp8Recipe recipe, LinearTensor tensor) {
  if (recipe != Fp8Recipe::blockwise) return kernels::Fp8Scaling::per_tensor;
  return tensor == LinearTensor::weight ? kernels::Fp8Scaling::blocks_128x128 : kernels::Fp8Scaling::blocks_1x128;
}

kernels::AttentionDims attention_dims(const AttentionShape& shape, double softcap) {
  kernels::AttentionDims dims{shape.batch, shape.seq_q, static_cast<int>(shape.heads),
                              static_cast<int>(shape.kv_heads), static_cast<int>(shape.head_dim), 0, 0, shape.causal};
  dims.v_head_dim = shape.v_head_dim;
  // The kernels window only a causal mask (the keys just before each query); a window on any other mask would be
  // run as full attention, so it is refused rather than dropped.
  if (shape.window > 0 && !shape.causal)
    throw std::logic_error("gpu::attention_dims: a window of " + std::to_string(shape.window) +
                           " keys on a mask that is not causal");
  dims.window = shape.window;
  if (shape.softcapped && !(softcap > 0))
    throw std::logic_error("gpu::attention_dims: a soft-capped attention op without a cap (the model's attention_softcap)");
  dims.softcap = shape.softcapped ? static_cast<float>(softcap) : 0.f;
  return dims;
}

namespace {

// The rows attention sinks fold into: a self-attention block's contiguous rows (a ring block's are strided).
kernels::AttentionSinkShape sink_shape(const kernels::AttentionDims& d) {
  if ((d.seq_kv != 0 && d.seq_kv != d.seq) || d.q_sequence_rows != 0)
    throw std::logic_error("gpu: attention sinks on a block of context parallelism's ring");
  return {d.batch, d.seq, d.heads, d.v_head_dim ? d.v_head_dim : d.head_dim};
}

}  // namespace

void launch(const AttentionForward& c, cudaStream_t stream) {
  if (c.unfused) {
    if (c.sinks) throw std::logic_error("gpu: unfused attention with sinks");
    c.unfused->forward(c.q, c.k, c.v, c.o, c.scores, c.dims, c.dropout, stream);
    return;
  }
  c.attention->forward(c.q, c.k, c.v, c.o, c.lse, c.dims, stream, c.dropout);
  if (c.sinks) kernels::attention_sinks_forward(c.o, c.lse, c.sinks, sink_shape(c.dims), stream);
}
void launch(const AttentionBackward& c, cudaStream_t stream) {
  if (c.unfused) {
    if (c.sinks) throw std::logic_error("gpu: unfused attention with sinks");
    c.unfused->backward(c.q, c.k, c.v, c.d_o, c.scores, c.dq, c.dk, c.dv, c.dims, c.dropout, stream);
    return;
  }
  if (c.sinks) {
    if (!c.d_sinks) throw std::logic_error("gpu: an attention backward with sinks but no gradient for them");
    const kernels::AttentionSinkShape shape = sink_shape(c.dims);
    float* partials = nullptr;
    TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partials),
                                    kernels::attention_sink_partial_floats(shape) * sizeof(float), stream));
    kernels::attention_sinks_backward(c.o, c.d_o, c.lse, c.sinks, partials, c.d_sinks, c.accumulate_sinks, shape,
                                      stream);
    TWIN_CUDA_CHECK(cudaFreeAsync(partials, stream));
  }
  c.attention->backward(c.q, c.k, c.v, c.o, c.d_o, c.lse, c.dq, c.dk, c.dv, c.dims, stream, c.dropout);
}

}  // namespace twin::gpu
