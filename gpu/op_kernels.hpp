// One kernel entry per op kind that runs a kernel of twin's own (core/op_kinds.hpp's kinds measured by
// CalibrationMethod::kernel_bench): a call struct naming the kind and everything its kernels read and write, and
// launch(), which enqueues exactly those kernels. twin execute launches an op of such a kind through its entry
// (executor/gpu/kernel_launch.hpp checks that the op is of the entry's kind) and calibration's benches launch the
// same entry (calibrate/gpu/kernel_benches.cpp), so calibration times what execution runs. The static_assert at the
// end holds this table and core/op_kinds.hpp's to each other: a kind measured by kernel_bench without an entry, or
// an entry for a kind measured otherwise, fails the build. GEMMs (gpu/matmul.hpp) and collectives are measured by
// their own sweeps.
#pragma once
#include <cstdint>
#include <tuple>
#include <utility>

#include <cuda_runtime.h>

#include "core/op.hpp"
#include "core/op_kinds.hpp"
#include "gpu/attention.hpp"
#include "gpu/fp8_block_cast.hpp"
#include "gpu/fp8_cast.hpp"
#include "gpu/kernels.hpp"
#include "gpu/unfused_attention.hpp"

namespace twin::gpu {

using kernels::bf16;

// rows x cols, RMSNorm (mean and bias unused) or LayerNorm; rstd (and mean) per row, kept for the backward. An
// RMSNorm's rows may lie in strided groups (`layout`: QK-norm's heads inside the fused QKV rows, normalised in
// place) and take one of two weights by row (`weights`: QK-norm's query heads q_norm, its key heads k_norm, in one
// launch); LayerNorm's are contiguous, with one weight.
struct NormForward {
  static constexpr OpKind kind = OpKind::norm_forward;
  Normalization normalization = Normalization::rmsnorm;
  const bf16* x = nullptr;
  const bf16* weight = nullptr;
  const bf16* bias = nullptr;
  bf16* y = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  std::int64_t rows = 0, cols = 0;
  kernels::NormRowLayout layout;  // x's and y's rows
  kernels::NormWeightRows weights;
};

// dx, and the weight's (and LayerNorm's bias's) gradient reduced from per-block partials in a fixed order, stored
// or added (`accumulate`: a later micro-batch's). With `skip` dx also adds the residual stream's gradient that
// skips the norm's branch (inside the RMSNorm kernel; after the LayerNorm kernel, by a residual add). With two
// weights (`weights`) weight_grad has two rows, the second's after the first's.
struct NormBackward {
  static constexpr OpKind kind = OpKind::norm_backward;
  Normalization normalization = Normalization::rmsnorm;
  const bf16* dy = nullptr;
  const bf16* x = nullptr;
  const bf16* weight = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  const bf16* skip = nullptr;
  bf16* dx = nullptr;
  float* partials = nullptr;  // kernels::norm_partial_floats(rows, cols) floats, twice that for LayerNorm or 2 weights
  kernels::GradRef weight_grad;  // bf16 or fp32 (the main gradient's dtype)
  kernels::GradRef bias_grad;
  bool accumulate = false;
  std::int64_t rows = 0, cols = 0;
  kernels::NormRowLayout x_layout, grad_layout;  // x's rows; dy's, dx's and skip's (RMSNorm only)
  kernels::NormWeightRows weights;               // RMSNorm only
};

// Rotary embedding of one run of equal sequences, in place on q and k (views into the fused QKV rows).
struct RopeForward {
  static constexpr OpKind kind = OpKind::rope_forward;
  bf16* q = nullptr;
  bf16* k = nullptr;
  const float2* table = nullptr;
  kernels::RopeShape shape;
};
struct RopeBackward {
  static constexpr OpKind kind = OpKind::rope_backward;
  bf16* dq = nullptr;
  bf16* dk = nullptr;
  const float2* table = nullptr;
  kernels::RopeShape shape;
};

// An MLP's activation of rows of fc1 output, 2 cols wide when gated (SwiGLU, GeGLU, quick GeGLU): the function is
// the op's (Op::activation, the model's), and quick GeGLU's offset and clamp the model's (glu_terms), for the executor
// and calibration's bench alike.
struct ActivationForward {
  static constexpr OpKind kind = OpKind::activation_forward;
  Activation activation = Activation::swiglu;
  const bf16* fc1 = nullptr;
  bf16* out = nullptr;
  std::int64_t rows = 0, cols = 0;
  kernels::GluTerms glu;
};
struct ActivationBackward {
  static constexpr OpKind kind = OpKind::activation_backward;
  Activation activation = Activation::swiglu;
  const bf16* fc1 = nullptr;
  const bf16* d_out = nullptr;
  bf16* d_fc1 = nullptr;
  std::int64_t rows = 0, cols = 0;
  kernels::GluTerms glu;
};
// The model's quick GeGLU terms (glu_linear_offset, activation_func_clamp_value) as its kernels take them.
kernels::GluTerms glu_terms(double glu_linear_offset, double activation_func_clamp_value);

// Hidden dropout inside an entry (the op's Op::dropout above 0, draw.probability): the 1-byte mask its forward
// writes and its backward reads, and, forward, where the rows of `cols` elements lie in the batch (the runs), which
// with the draw's seed and subsequence decides each element's bit (gpu/kernels.hpp). mask null: no dropout.
struct HiddenDropout {
  kernels::DropoutDraw draw;
  std::uint8_t* mask = nullptr;
  const kernels::DropoutRun* runs = nullptr;
  int run_count = 0;
  bool active() const { return mask != nullptr; }
};

// The element-wise op the graph has: out = a + b (a residual add, or a ring's gradient share; out may alias). With
// hidden dropout (a residual's Megatron bias-dropout-add): forward out = a + mask * b / (1 - p), the mask drawn
// (`dropout.runs` over rows of `cols`); backward (`dropped` set) out = a + b (b null: out is a, nothing added), then
// dropped = out * mask / (1 - p), the branch's gradient. With `gradient` set (a weight gradient written apart added
// into the main gradient, bf16 or fp32; a and out unset): gradient += b.
struct Elementwise {
  static constexpr OpKind kind = OpKind::elementwise;
  const bf16* a = nullptr;
  const bf16* b = nullptr;
  bf16* out = nullptr;
  std::int64_t count = 0;
  HiddenDropout dropout;
  std::int64_t cols = 0;
  bf16* dropped = nullptr;
  kernels::GradRef gradient;
};

// The vocab-parallel embedding: this GPU holds table rows [vocab_start, vocab_start + vocab_rows). With learned
// positions (`positions`, the table [max positions, cols]) the rows of `position_runs` add their positions' rows:
// on one GPU of a TP group only, before the group's reduction, so that the sum holds them once.
struct EmbeddingForward {
  static constexpr OpKind kind = OpKind::embedding_forward;
  const std::int32_t* tokens = nullptr;
  const bf16* table = nullptr;
  bf16* out = nullptr;
  std::int64_t rows = 0, cols = 0, vocab_start = 0, vocab_rows = 0;
  const bf16* positions = nullptr;
  const kernels::PositionRun* position_runs = nullptr;
  int position_run_count = 0;
  HiddenDropout dropout;  // Megatron's embedding dropout: out = mask * out / (1 - p) after the positions, in place
};
// grad[token] += dy[row] deterministically; `starts_gradient`: the step's first, which zeroes the table's gradient.
struct EmbeddingBackward {
  static constexpr OpKind kind = OpKind::embedding_backward;
  const std::int32_t* tokens = nullptr;
  const bf16* dy = nullptr;
  kernels::GradRef grad;      // bf16 or fp32 (the main gradient's dtype), as position_grad
  void* workspace = nullptr;  // kernels::embedding_backward_workspace_bytes(rows)
  std::size_t workspace_bytes = 0;
  bool starts_gradient = false;
  std::int64_t rows = 0, cols = 0, vocab_start = 0, vocab_rows = 0;
  // Learned positions: their gradient (zeroed first with `starts_position_gradient`: the step's first write of it,
  // which with a tied table is not the table's first, the output projection's) adds the rows of `position_runs` of
  // `position_dy` (the rows whose sum over the TP group is the positions' whole gradient).
  bool starts_position_gradient = false;
  kernels::GradRef position_grad;
  const bf16* position_dy = nullptr;
  std::int64_t position_rows = 0;  // rows of the position table
  const kernels::PositionRun* position_runs = nullptr;
  int position_run_count = 0;
  // The embedding's dropout: dy * mask / (1 - p) written to `dropped_dy` (may be dy) first, which the table's and the
  // positions' gradients then read (position_dy, when it is dy).
  HiddenDropout dropout;
  bf16* dropped_dy = nullptr;
};

// A vocabulary shard's statistics per row (max, sum of exponentials, the target's logit). With `token_loss` (the
// whole vocabulary here) also the loss per row, and with `loss_sum` its sum added there; a vocabulary split over
// TP finishes the loss after the all-reduces of the statistics (a collective op of its own).
struct LossForward {
  static constexpr OpKind kind = OpKind::loss_forward;
  const bf16* logits = nullptr;
  const std::int32_t* targets = nullptr;
  float* row_max = nullptr;
  float* sum_exp = nullptr;
  float* target_logit = nullptr;
  float* token_loss = nullptr;
  float* loss_sum = nullptr;
  std::int64_t rows = 0, vocab_rows = 0, vocab_start = 0;
  float softcap = 0;  // > 0: the logits soft-capped at it first (an op with softcapped_logits; the model's cap)
  // An unfused op's (Op::unfused_loss, the whole vocabulary): Megatron-LM's passes over this fp32 copy of the logits
  // [rows, vocab_rows] (core/unfused_loss.hpp), left holding their softmax; row_max, sum_exp and target_logit (the
  // shifted target) are written on the way, and token_loss (required) is the loss. No cap.
  float* fp32_logits = nullptr;
};
// d logits = (softmax - onehot(target)) * scale, written over the logits where d_logits aliases them.
struct LossBackward {
  static constexpr OpKind kind = OpKind::loss_backward;
  const bf16* logits = nullptr;
  const float* row_max = nullptr;  // the global ones
  const float* sum_exp = nullptr;
  const std::int32_t* targets = nullptr;
  bf16* d_logits = nullptr;
  float scale = 1;
  std::int64_t rows = 0, vocab_rows = 0, vocab_start = 0;
  float softcap = 0;  // as LossForward's: the gradient goes through the cap to the stored logits
  // An unfused op's: the forward's fp32 softmax, turned into the gradient in place and cast to d_logits (`logits`,
  // row_max and sum_exp unread).
  float* fp32_softmax = nullptr;
};

// An MoE dispatch: forward, each token's rows copied into expert order (`order`); backward, each token's gradient
// the sum of its copies' (`routed_row`, the inverse order).
struct MoePermute {
  static constexpr OpKind kind = OpKind::moe_permute;
  bool backward = false;
  const bf16* in = nullptr;
  const std::int32_t* order = nullptr;
  const std::int32_t* routed_row = nullptr;
  bf16* out = nullptr;
  int top_k = 1;
  std::int64_t tokens = 0, cols = 0;
  std::int64_t rows = 0;  // forward: expert-order rows (0: tokens x top_k, dropless; under a capacity its layout's)
};
// An MoE combine: forward, each token the weighted sum of its copies; backward, the copies' gradients and the
// combine weights' (`d_weight`, from the expert outputs `in`).
struct MoeUnpermute {
  static constexpr OpKind kind = OpKind::moe_unpermute;
  bool backward = false;
  const bf16* in = nullptr;
  const std::int32_t* order = nullptr;
  const std::int32_t* routed_row = nullptr;
  const float* weight = nullptr;
  bf16* out = nullptr;  // forward: the combined rows
  const bf16* d_out = nullptr;
  bf16* d_in = nullptr;
  float* d_weight = nullptr;
  int top_k = 1;
  std::int64_t tokens = 0, cols = 0;
  const bf16* add = nullptr;  // forward: added to the combined rows (the shared experts' output; may be out)
  std::int64_t rows = 0;      // backward: expert-order rows (0: tokens x top_k, dropless; under a capacity its layout's)
};

// AdamW over one span of a weight buffer, the gradient (bf16 or fp32) scaled by the clip factor first.
struct OptimizerStep {
  static constexpr OpKind kind = OpKind::optimizer_step;
  kernels::AdamWState state;
  kernels::GradRef grad;
  bf16* param = nullptr;
  std::int64_t count = 0;
  kernels::AdamWParams params;
  const float* clip_scale = nullptr;
};

// A linear's tensor (its input, output gradient or weight) cast to FP8 with one scale per tensor: the rowwise copy,
// the columnwise one (its transpose) where a GEMM reads it so, and the scaling record (gpu/fp8_cast.hpp). `recipe`
// (the op's Op::fp8_recipe) names the kernel: tensorwise, the tensor's own scale (current scaling); delayed, the
// scale of the tensor's earlier casts held in `delayed_state`, this cast being number `cast_index` of that state;
// blockwise, a scale per block (`blocks`, gpu/fp8_block_cast.hpp), `scaling` then the rowwise copy's scale record
// and `columnwise_scaling` the columnwise one's. mxfp8 has no cast here (launch throws).
struct Fp8Cast {
  static constexpr OpKind kind = OpKind::fp8_cast;
  const bf16* x = nullptr;
  std::int64_t rows = 0, cols = 0;
  kernels::Fp8Type type = kernels::Fp8Type::e4m3;
  std::uint8_t* rowwise = nullptr;
  std::uint8_t* columnwise = nullptr;
  float* scaling = nullptr;  // kernels::kFp8ScalingFloats
  float* delayed_state = nullptr;  // kernels::fp8_delayed_state_floats(history_len)
  int history_len = 0;
  std::int64_t cast_index = 0;
  Fp8Recipe recipe = Fp8Recipe::tensorwise;
  kernels::Fp8Scaling blocks = kernels::Fp8Scaling::per_tensor;  // blockwise: 1x128 or 128x128
  float* columnwise_scaling = nullptr;  // blockwise: kernels::fp8_block_scale_floats(blocks, cols, rows)
  float* reduced_amax = nullptr;  // delayed: the amax goes to the amax group's reduction (fp8_cast_delayed_scaling)
  // tensorwise: `scaling` already holds the amax pass's maxima, all-reduced over the TP group (Op::fp8_amax_reduced):
  // only the cast runs (kernels::fp8_cast_from_amax_partials). Calibration times the one-call cast, amax and cast.
  bool amax_reduced = false;
};

// The columnwise copy of an FP8 tensor [rows, cols] from its rowwise copy (gathered rows of an SP gather under one
// scale per tensor: Transformer Engine cannot gather the transpose on Hopper), one byte an element each way; the
// scale record is the rowwise copy's, which the caller keeps (kernels::fp8_transpose, gpu/fp8_cast.hpp).
struct Fp8Transpose {
  static constexpr OpKind kind = OpKind::fp8_transpose;
  const std::uint8_t* rowwise = nullptr;
  std::int64_t rows = 0, cols = 0;
  std::uint8_t* columnwise = nullptr;
};

// The blocks a cast of `tensor` takes under `recipe`: blockwise, 128 x 128 for a weight and 1x128 for an input or
// output gradient (DeepSeek-V3's recipe); per tensor under the other recipes. Calibration's bench and the executor
// both ask it.
kernels::Fp8Scaling fp8_cast_blocks(Fp8Recipe recipe, LinearTensor tensor);

// The kernel's dimensions of an attention op's shape (contiguous rows, whole sequences): heads, head dims, the
// causal mask and its window as the op says them, and `softcap` (the model's attention_softcap) where the op says its
// scores are soft-capped (a soft-capped op without a cap > 0 throws std::logic_error). Calibration's bench runs them
// as they are; the executor starts from them and sets its rows' strides and its runs of sequences, so the window and
// the cap reach the kernel one way.
kernels::AttentionDims attention_dims(const AttentionShape& shape, double softcap);

// Attention of one run of equal sequences: fused, through the executor's attention implementation; or, for an op
// whose AttentionShape::flash is false, `unfused` set, Megatron-LM's unfused kernels (gpu/unfused_attention.hpp),
// which keep `scores` for the backward and write no lse.
struct AttentionForward {
  static constexpr OpKind kind = OpKind::attention_forward;
  Attention* attention = nullptr;
  const bf16* q = nullptr;
  const bf16* k = nullptr;
  const bf16* v = nullptr;
  bf16* o = nullptr;
  float* lse = nullptr;
  kernels::AttentionDims dims;
  AttentionDropout dropout;  // the op's attention dropout and its call's key; calibration times none
  // The layer's sinks [heads] (an op whose AttentionShape::sinks is set; nullptr: none): the plain attention, then
  // kernels::attention_sinks_forward folds them into o and lse (contiguous rows only: no ring block).
  const bf16* sinks = nullptr;
  UnfusedAttention* unfused = nullptr;
  UnfusedScores scores;
};
struct AttentionBackward {
  static constexpr OpKind kind = OpKind::attention_backward;
  Attention* attention = nullptr;
  const bf16* q = nullptr;
  const bf16* k = nullptr;
  const bf16* v = nullptr;
  const bf16* o = nullptr;
  const bf16* d_o = nullptr;
  const float* lse = nullptr;
  bf16* dq = nullptr;
  bf16* dk = nullptr;
  bf16* dv = nullptr;
  kernels::AttentionDims dims;
  AttentionDropout dropout;  // the forward's
  // With sinks (the forward's, which left o and lse with them folded in): their gradient into d_sinks [heads],
  // stored, or added where `accumulate_sinks` (a later micro-batch or run of sequences).
  const bf16* sinks = nullptr;
  bf16* d_sinks = nullptr;
  bool accumulate_sinks = false;
  // An unfused op's: its forward's kernels and kept scores (o and lse unread).
  UnfusedAttention* unfused = nullptr;
  UnfusedScores scores;
};

void launch(const NormForward& call, cudaStream_t stream);
void launch(const NormBackward& call, cudaStream_t stream);
void launch(const RopeForward& call, cudaStream_t stream);
void launch(const RopeBackward& call, cudaStream_t stream);
void launch(const ActivationForward& call, cudaStream_t stream);
void launch(const ActivationBackward& call, cudaStream_t stream);
void launch(const Elementwise& call, cudaStream_t stream);
void launch(const EmbeddingForward& call, cudaStream_t stream);
void launch(const EmbeddingBackward& call, cudaStream_t stream);
void launch(const LossForward& call, cudaStream_t stream);
void launch(const LossBackward& call, cudaStream_t stream);
void launch(const MoePermute& call, cudaStream_t stream);
void launch(const MoeUnpermute& call, cudaStream_t stream);
void launch(const OptimizerStep& call, cudaStream_t stream);
void launch(const Fp8Cast& call, cudaStream_t stream);
void launch(const Fp8Transpose& call, cudaStream_t stream);
void launch(const AttentionForward& call, cudaStream_t stream);
void launch(const AttentionBackward& call, cudaStream_t stream);

// Every entry, once.
using OpKernelCalls = std::tuple<NormForward, NormBackward, RopeForward, RopeBackward, ActivationForward,
                                 ActivationBackward, Elementwise, EmbeddingForward, EmbeddingBackward, LossForward,
                                 LossBackward, MoePermute, MoeUnpermute, OptimizerStep, Fp8Cast, Fp8Transpose,
                                 AttentionForward, AttentionBackward>;

// Entries for `kind` in OpKernelCalls.
constexpr int op_kernel_entries(OpKind kind) {
  return [kind]<std::size_t... I>(std::index_sequence<I...>) {
    return ((std::tuple_element_t<I, OpKernelCalls>::kind == kind ? 1 : 0) + ... + 0);
  }(std::make_index_sequence<std::tuple_size_v<OpKernelCalls>>{});
}

// Each kind calibration times as a kernel of twin's own has one entry; every other kind none.
static_assert([] {
  for (OpKind kind : all_op_kinds())
    if (op_kernel_entries(kind) != (op_kind_traits(kind).measured_by == CalibrationMethod::kernel_bench ? 1 : 0))
      return false;
  return true;
}(), "gpu/op_kernels.hpp: every op kind measured by kernel_bench (core/op_kinds.hpp) needs exactly one entry");

}  // namespace twin::gpu
