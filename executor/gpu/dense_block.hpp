// The interpreter's handler of a dense model's ops (Megatron-LM's GPT layers): each transformer layer's norms,
// linears and their tensor-parallel collectives, RoPE, attention, the MLP activation and the residual adds, and the
// stage's ends, the vocab-parallel embedding and cross-entropy. It owns what those ops share beyond the tensor
// store: the cuDNN attention handle, the RoPE table, the micro-batches' tokens, the loss sum and the embedding
// backward's workspace. One public function per action (executor/op_binding.hpp): the runtime's dispatch names
// each. Layouts are row-major, linears y = x W with W stored [in, out].
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "core/layer.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"
#include "gpu/unfused_attention.hpp"

namespace twin::exec {

// The kernel's dimensions of attention op `op` over one run of equal sequences of a layer of shapes `s`: the op's
// own (gpu::attention_dims, what calibration benches: heads, head dim, the causal mask and its window) on the fused
// QKV rows the layer keeps. Throws std::logic_error where the op's heads or head dim are not the layer's.
kernels::AttentionDims run_attention_dims(const Op& op, const lowering::RankShapes& s, const EqualSequences& run);

// What the dense block reads from the stage that runs it.
struct DenseStage {
  const StageLayout& layout;
  StageParameters& parameters;
  TensorStore& tensors;
  std::int64_t loss_tokens = 0;  // tokens the step's loss averages over (all its parts)
  // The embedding's first row among the rows of its shapes' sequences (StepPart::input_first_row).
  std::int64_t input_first_row = 0;
  AttentionImplementation attention = kDefaultAttentionImplementation;
  // Hidden dropout's key (executor/dropout_key.hpp): the run's seed, and the step's sequence that micro-batch m's
  // first row belongs to, first_sequence + m * micro_batch_stride (StepPart's).
  std::uint64_t seed = 0;
  std::int64_t first_sequence = 0, micro_batch_stride = 0;
};

// A linear's weight: [in, out] in its unit, or, for a tied output projection, the embedding table (or its copy)
// stored [out, in] = [vocab, hidden].
struct LinearWeight {
  __nv_bfloat16* params = nullptr;
  kernels::GradRef grads;  // bf16 or fp32: the main gradient's dtype
  std::int64_t in = 0, out = 0;
  bool stored_out_by_in = false;
  int unit = 0;  // the parameter unit and tensor that hold it (and its gradient)
  OpRole role = OpRole::none;
};

// The block of `role` in a transformer layer of a model with or without post norms (core/layer.hpp's layer_blocks:
// Gemma-2 and 3's residuals add the branch's norm), or the embedding's or head's (layer::block_of).
const layer::Block& dense_block_of(OpRole role, bool post_norms);

// The tensors of one linear layer in its unit's slot (executor/gpu/fp8_linears.cpp reads them too).
struct LinearTensors {
  Act input, input_full, output;  // forward: output = input_full W
  Act d_output, d_output_full;    // backward: d_input_full = d_output_full W^T
  Act d_input_full, d_input;      // d_input: after the TP reduction (or the same tensor without one)
};
// With `post_norms` (or hidden dropout: DenseBlock::branch_has_own_gradient) a row-parallel linear's output gradient is
// its own output's, which the post norm's backward (the residual's backward, the gradient through the dropout mask)
// writes; without, the residual's output gradient (the branch's).
LinearTensors linear_tensors(OpRole subject, bool post_norms = false);

class DenseBlock {
 public:
  // Allocates its buffers from `stage.tensors` and builds the RoPE table on `stream`.
  DenseBlock(const DenseStage& stage, cudaStream_t stream);
  // The row-parallel linear's output gradient is its own output's, not the residual's (post norms, or hidden dropout
  // between it and the residual add): linear_tensors' `post_norms`.
  bool branch_has_own_gradient() const;

  gpu::Attention& attention() { return *attention_; }  // shared with context parallelism's ring
  // The iteration's micro-batches (each its inputs then its targets) onto the device, the loss sum zeroed.
  // `iteration` keys the step's dropout masks.
  void start_iteration(int iteration, const std::vector<std::int32_t>& tokens, cudaStream_t stream);
  // After the iteration: the sum of this rank's per-token losses (waits for the device).
  double loss_sum() const;
  LinearWeight linear_weight(OpRole subject, int unit);

  void linear_forward(const OpPass& p);
  void linear_input_grad(const OpPass& p);
  void linear_weight_grad(const OpPass& p);
  void gather_input(const OpPass& p);
  void reduce_output(const OpPass& p);
  void gather_output_grad(const OpPass& p);
  void reduce_input_grad(const OpPass& p);
  void norm_forward(const OpPass& p);
  void norm_backward(const OpPass& p);
  void residual_forward(const OpPass& p);
  void residual_backward(const OpPass& p);
  void rope_forward(const OpPass& p);
  void rope_backward(const OpPass& p);
  // Flash (cuDNN) or unfused attention (an op whose AttentionShape::flash is false: Megatron-LM's kernels, their
  // scores kept in the block's statistics slot), per run of equal sequences.
  void attention_forward(const OpPass& p);
  void attention_backward(const OpPass& p);
  void activation_forward(const OpPass& p);
  void activation_backward(const OpPass& p);
  void embedding_forward(const OpPass& p);
  void embedding_backward(const OpPass& p);
  void loss_forward(const OpPass& p);
  void loss_reduce(const OpPass& p);
  void loss_backward(const OpPass& p);
  // Without gradient accumulation fusion (a grad_accumulation op): the linear's weight and bias gradients, which its
  // GEMM wrote apart, added to their gradients (zeroed at the step's start); the tensor freed.
  void accumulate_weight_gradient(const OpPass& p);
  // A linear's bias around a product run elsewhere (the FP8 linears', executor/gpu/fp8_linears.hpp): the bias this
  // rank adds to its output (nullptr: none, or a replicated one that TP rank 0 adds), and its gradient (added after
  // the step's first micro-batch) from the output's gradient [rows, cols] as a bf16 product would take it; nothing
  // for a linear without a bias.
  __nv_bfloat16* forward_bias(const OpPass& p);
  void linear_bias_grad(const OpPass& p, const __nv_bfloat16* d_output_full, std::int64_t rows, std::int64_t cols);

 private:
  // A TP collective of the unit's tensor `from` into `to`: an all-gather, or a reduce (reduce-scatter under SP,
  // else all-reduce in place), as the op's kind says.
  void gather(const OpPass& p, Act from, Act to);
  void reduce(const OpPass& p, Act from, Act to);
  // The stream input of a residual block (the unit's input is the previous unit's output), and what follows a
  // forward residual add wherever it runs (its own op, or a GEMM's epilogue).
  const __nv_bfloat16* residual_stream(const OpPass& p, const layer::Block& residual);
  // The model's post norms (Gemma-2 and 3): the blocks of its layers, a norm's input (a post norm's: its branch
  // after the TP reduction where one ran).
  bool post_norms() const;
  const layer::Block& block(OpRole role) const { return dense_block_of(role, post_norms()); }
  const __nv_bfloat16* norm_input(const OpPass& p, const layer::Block& norm);
  void residual_forward_done(const OpPass& p, const layer::Block& residual);
  // Selective recompute of Megatron's `layernorm` and `mlp` modules (dense_block_recompute.cpp), after a block's
  // forward (`done_role`, the role of the block the op ran): its input where the layer description says a recomputed
  // module discards it; a recomputed FC2's output.
  void release_for_module_recompute(const OpPass& p, OpRole done_role);
  std::int64_t residual_elements(const OpPass& p) const;  // this GPU's rows x hidden of the op's unit
  // Hidden dropout (dense_block_dropout.cpp): the op's draw (its probability, the run's seed, the step's and site's
  // subsequence), and the rows of micro-batch `mb`'s tensor as runs of the batch's tokens: the stage's residual
  // stream rows here (`sequence_sharded`: the TP rank's slice under SP, the GPU's shard beside a Ulysses layer), the
  // same under every unit's layout, or all the embedding's rows (its lookup, before its TP reduction).
  kernels::DropoutDraw dropout_draw(const Op& op) const;
  std::vector<kernels::DropoutRun> dropout_runs(int mb, bool sequence_sharded) const;
  // Attention dropout of the fused-attention call of `op` (unit `unit`, micro-batch `mb`) whose queries start at row
  // `first_row` here: the op's probability and the call's Philox seed (executor/dropout_key.hpp); none at 0.
  gpu::AttentionDropout attention_dropout(const Op& op, int mb, int unit, std::int64_t first_row) const;
  // RoPE's runs of rows (under context parallelism: a rank's two chunks of each sequence).
  struct RopeRun {
    std::int64_t first_token, tokens, period, first_position;
  };
  std::vector<RopeRun> rope_runs(int mb, const lowering::RankShapes& s) const;
  // QK-norm's norm ops (dense_block_qk_norm.cpp): the query and key heads of the unit's QKV rows.
  void qk_norm_forward(const OpPass& p);
  void qk_norm_backward(const OpPass& p);
  // GPT's additions (dense_block_gpt.cpp): a linear's bias added to its output [rows, cols] and its gradient from the
  // output's gradient (nothing without add_bias_linear), and the embedding's rows [first_row, end_row) as runs of
  // positions for learned position embeddings.
  const WeightTensor* linear_bias_tensor(const OpPass& p);
  kernels::GradRef fused_bias_grad(const OpPass& p, MatmulProblem& problem, bool output_grad_is_a);
  // Where a linear's weight-gradient op puts the weight's and the bias's gradients (dense_block_accumulation.cpp): the
  // gradients themselves, stored by the step's first writer and added to by later ones, or apart
  // (OpBinding::gradient_apart), a tensor of the weight's then the bias's elements, always stored.
  struct GradientTarget {
    kernels::GradRef weight;  // the main gradient (bf16 or fp32), or the bf16 tensor a gradient apart goes to
    kernels::GradRef bias;    // unset: the linear has none
    bool store = true;        // else add
  };
  GradientTarget gradient_target(const OpPass& p);
  Act gradient_apart_name(OpRole linear) const;
  void finish_fused_bias_grad(const OpPass& p, std::int64_t cols);
  std::vector<kernels::PositionRun> position_runs(int mb, const lowering::RankShapes& s, std::int64_t first_row,
                                                  std::int64_t end_row) const;
  float logit_softcap(const Op& op) const;
  const std::int32_t* inputs(int mb) const;
  const std::int32_t* targets(int mb) const;

  DenseStage stage_;
  std::unique_ptr<gpu::Attention> attention_;  // one cuDNN handle; the stream is set per call
  std::unique_ptr<gpu::UnfusedAttention> unfused_;  // a model of unfused attention only (its cuBLASLt handle)
  float2* rope_table_ = nullptr;
  std::int32_t* tokens_ = nullptr;  // [micro_batches][inputs + targets]
  int iteration_ = 0;
  float* loss_sum_ = nullptr;       // device scalar
  void* embedding_workspace_ = nullptr;
  std::size_t embedding_workspace_bytes_ = 0;
};

}  // namespace twin::exec
