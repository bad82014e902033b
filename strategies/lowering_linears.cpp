// The ops of a tensor-parallel linear layer as Megatron-LM issues them.
// Column-parallel linears: [SP all-gather] GEMM forward; backward re-gathers the input for wgrad (SP),
// runs dgrad, reduces the input gradient (reduce-scatter with SP, all-reduce without) while wgrad runs.
// Row-parallel linears: GEMM then reduce-scatter (SP) or all-reduce; backward all-gathers the gradient (SP).
// With Transformer Engine's userbuffers (framework.tp_comm_overlap) the SP collective beside a GEMM is
// pipelined with the GEMM's chunks, as initialize_ub's defaults run it: an all-gather in ring steps on the
// copy engines, a reduce-scatter per chunk on a few SMs, backward's collectives "bulk" beside the GEMM
// that does not need them (sim/engine.hpp: how each slows compute); without gradient accumulation fusion each
// weight gradient is added into the fp32 main gradient by a kernel of its own.
// A layer in FP8 (training.fp8) runs them as Transformer Engine's Linear does: the input cast to FP8 (on the
// local rows, before the SP gather, which then moves FP8) with its columnwise copy kept for wgrad (under SP with
// per-tensor scales: the rowwise copy gathered, and an fp8_transpose op before wgrad), the output gradient likewise in
// backward, the GEMMs on FP8 operands (E5M2 gradients in the hybrid format; wgrad in 16
// bits when fp8.wgrad is off); the weights' casts come after the optimizer step (strategies/lowering_pipeline.cpp).
#include <vector>

#include "strategies/fp8_linears.hpp"
#include "strategies/lowering_linears.hpp"

namespace twin::lowering {

Op tp_op(OpKind kind, OpRole role, const RankShapes& s, std::int64_t bytes, OpRole linear, LinearTensor tensor) {
  return Emitter::serving(Emitter::collective(kind, role, Stream::tp_comm, GroupKind::tensor, s.tp, bytes), linear,
                          tensor);
}

namespace {

bool fp8_wgrad(const Emitter& e) { return e.fp8_linears() && e.shapes().fp8->wgrad; }

}  // namespace

// A GEMM of the linear `role`, on FP8 operands where the layer runs in FP8.
Op linear_gemm(const Emitter& e, OpRole role, GemmPass pass, std::int64_t m, std::int64_t n, std::int64_t k) {
  Op op = Emitter::gemm(role, pass, m, n, k);
  if (e.fp8_linears() && (pass != GemmPass::weight_gradient || fp8_wgrad(e))) {
    const Fp8Config& fp8 = *e.shapes().fp8;
    op.gemm.inputs = fp8_gemm_inputs(fp8.recipe, pass);
    op.gemm.e5m2 = pass != GemmPass::forward && fp8.format == Fp8Format::hybrid;
  }
  return op;
}

namespace {

Op fp8_cast_op(const Emitter& e, OpRole role, LinearTensor tensor, std::int64_t rows, std::int64_t cols,
               bool columnwise) {
  Op op = Emitter::rows_cols(OpKind::fp8_cast, role, rows, cols);
  op.linear = role;
  op.linear_tensor = tensor;
  op.fp8_columnwise = columnwise;
  op.fp8_recipe = e.shapes().fp8->recipe;
  op.bytes = fp8_cast_bytes(op.fp8_recipe, rows * cols, op.fp8_columnwise);
  return op;
}

// Per-tensor FP8 (current or delayed scaling) under SP: Transformer Engine cannot all-gather a transpose
// (Float8Quantizer and Float8CurrentScalingQuantizer: supports_only_rowwise_all_gather), so a tensor SP gathers is
// cast on the local rows into its rowwise copy only, the gather moves that copy, and the gathered rows are
// transposed where wgrad reads the columnwise copy (_all_gather_fp8, transformer_engine/pytorch/distributed.py;
// _Linear's forward and backward, module/linear.py; NVIDIA/TransformerEngine d0067d0da6). Block scales gather
// either copy as it is.
bool gathers_rowwise_fp8(const Emitter& e) {
  if (!e.fp8_linears() || !tp_active(e.shapes()) || !e.shapes().sp) return false;
  switch (e.shapes().fp8->recipe) {
    case Fp8Recipe::delayed:
    case Fp8Recipe::tensorwise: return true;
    case Fp8Recipe::blockwise:
    case Fp8Recipe::mxfp8: return false;
  }
  return false;
}

}  // namespace

// Where the layer runs in FP8: the cast of `tensor` (rows x cols) of the linear `role`, with its columnwise copy
// when the weight gradient reads it in FP8.
void cast_to_fp8(Emitter& e, OpRole role, LinearTensor tensor, std::int64_t rows, std::int64_t cols) {
  if (!e.fp8_linears()) return;
  e.emit(fp8_cast_op(e, role, tensor, rows, cols, fp8_wgrad(e)));
}

namespace {

// What an SP gather of the linear's input or output gradient, `width` wide, moves: FP8 where the layer casts before
// it (in backward, the input again only when wgrad reads it in FP8). The width is h for every linear
// but MLA's up projections, whose inputs are the latents (q_lora_rank, kv_lora_rank wide).
std::int64_t gathered_bytes(const Emitter& e, bool fp8, std::int64_t width) {
  return e.shapes().tokens * width * (fp8 ? 1 : 2);
}

// Current scaling (tensorwise) all-reduces (max) the amax of a tensor that SP gathers in FP8 over the TP group
// before its scale, so that every rank's shard takes the one scale the gathered tensor keeps ("Assume scaling
// factors are identical across ranks", _all_gather_fp8 in transformer_engine/pytorch/distributed.py): the
// column-parallel input forward and the row-parallel output gradient backward (set_quantizer_amax_reduction_group
// in _Linear's forward and backward, module/linear.py; Float8CurrentScalingQuantizer::quantize_impl's blocking
// all-reduce between the amax and the cast, csrc/quantizer.cpp; NVIDIA/TransformerEngine d0067d0da6). One float;
// the cast op after it prices the amax pass and the cast. Delayed scaling reduces its amaxes once a pass
// (strategies/lowering_pipeline.cpp), block scales need none.
// The op says the tensor it took the amax of (its local rows x cols): the cast after it, of the same tensor, scales
// by that amax (Op::fp8_amax_reduced).
void reduce_gathered_amax(Emitter& e, OpRole role, LinearTensor tensor, std::int64_t rows, std::int64_t cols) {
  const RankShapes& s = e.shapes();
  if (!e.fp8_linears() || s.fp8->recipe != Fp8Recipe::tensorwise || !tp_active(s) || !s.sp) return;
  Op op = Emitter::serving(
      Emitter::collective(OpKind::all_reduce, OpRole::fp8_amax, Stream::tp_comm, GroupKind::tensor, s.tp, 4), role,
      tensor);
  op.rows = rows;
  op.cols = cols;
  e.emit(op);
}

// The cast of a tensor SP then gathers (`rows`: this rank's), as gathers_rowwise_fp8 says: the rowwise copy alone
// under per-tensor scales, scaled by the TP group's amax under current scaling.
void cast_before_gather(Emitter& e, OpRole role, LinearTensor tensor, std::int64_t rows, std::int64_t cols) {
  if (!e.fp8_linears()) return;
  if (!gathers_rowwise_fp8(e)) return cast_to_fp8(e, role, tensor, rows, cols);
  Op op = fp8_cast_op(e, role, tensor, rows, cols, false);
  op.fp8_amax_reduced = op.fp8_recipe == Fp8Recipe::tensorwise;
  e.emit(op);
}

// The SP all-gather of `tensor` of the linear `role`, `width` wide, in FP8 where `fp8` (its rowwise copy alone
// under per-tensor scales: transpose_gathered then writes the columnwise copy wgrad reads), else bf16.
Op sp_gather(const Emitter& e, OpRole role, LinearTensor tensor, std::int64_t width, bool fp8) {
  Op op = tp_op(OpKind::all_gather, OpRole::tp_gather, e.shapes(), gathered_bytes(e, fp8, width), role, tensor);
  op.fp8_payload = fp8;
  return op;
}

// Where SP `gather`ed a per-tensor FP8 tensor's rowwise copy alone (gathers_rowwise_fp8) and wgrad reads it in FP8:
// the transpose of the gathered rows (tokens x width) into the columnwise copy, a memory-bound kernel on the compute
// stream after `after` (the data gradient) and the gather, before wgrad. Transformer Engine's _Linear runs it there:
// update_usage(columnwise_usage=True) after the gather's wait, just before the wgrad GEMM (module/linear.py at
// NVIDIA/TransformerEngine d0067d0da6). Returns the transpose, or `after` where none runs.
OpIndex transpose_gathered(Emitter& e, OpRole role, LinearTensor tensor, std::int64_t width, OpIndex gather,
                           OpIndex after) {
  if (gather == kNoOp || !fp8_wgrad(e) || !gathers_rowwise_fp8(e)) return after;
  const std::int64_t rows = e.shapes().tokens;
  Op op = Emitter::rows_cols(OpKind::fp8_transpose, role, rows, width);
  op.linear = role;
  op.linear_tensor = tensor;
  op.bytes = fp8_transpose_bytes(rows * width);
  const OpIndex transpose = e.emit_after(op, after);
  e.depend(gather, transpose);
  return transpose;
}

// A TP collective Transformer Engine's userbuffers run beside a GEMM ("bulk": on a few SMs).
Op userbuffers_op(OpKind kind, OpRole role, const RankShapes& s, std::int64_t bytes, OpRole linear,
                  LinearTensor tensor) {
  Op op = tp_op(kind, role, s, bytes, linear, tensor);
  op.comm_kernel = CommKernel::userbuffers_sm;
  return op;
}

// One step of a TP ring: every rank passes one rank's shard of `tensor` of `linear` to its neighbour, with
// the copy engines ("ring_exchange").
Op tp_ring_step(OpRole role, const RankShapes& s, OpRole linear, LinearTensor tensor, std::int64_t gathered) {
  Op op = Emitter::serving(
      Emitter::collective(OpKind::send, role, Stream::tp_comm, GroupKind::tensor, s.tp, gathered / s.tp),
      linear, tensor);
  op.comm_kernel = CommKernel::userbuffers_copy_engine;
  op.transfer = Transfer::tensor_ring;
  return op;
}

// One of `splits` row chunks of a userbuffers GEMM (priced as its share of the whole: GemmShape::split).
Op gemm_chunk(const Emitter& e, OpRole role, GemmPass pass, std::int64_t rows, int splits, std::int64_t n,
              std::int64_t k) {
  Op op = linear_gemm(e, role, pass, rows / splits, n, k);
  op.gemm.split = splits;
  return op;
}

// Userbuffers all-gather + GEMM ("ring_exchange"): tp - 1 ring steps bring the other ranks' shards of the
// GEMM's input (`gathered`: the linear's input forward, its output gradient backward) while the GEMM runs in
// tp chunks of rows, the chunk of this rank's own shard first and chunk i once step i has arrived. Returns the
// last step (what needs the whole gathered input waits for it).
OpIndex gathered_gemm(Emitter& e, OpRole role, GemmPass pass, LinearTensor gathered, std::int64_t n, std::int64_t k) {
  const RankShapes& s = e.shapes();
  reduce_gathered_amax(e, role, gathered, s.tokens_local, k);
  cast_to_fp8(e, role, gathered, s.tokens_local, k);  // k: the gathered tensor's width, forward and backward
  const OpIndex input = e.chain;
  const std::int64_t bytes = gathered_bytes(e, e.fp8_linears(), k);
  std::vector<OpIndex> steps;
  for (int step = 1; step < s.tp; ++step)
    steps.push_back(
        e.emit_after(tp_ring_step(OpRole::tp_gather, s, role, gathered, bytes), step == 1 ? input : kNoOp));
  for (int chunk = 0; chunk < s.tp; ++chunk) {
    if (chunk > 0) e.pending_wait = steps[chunk - 1];
    e.emit(gemm_chunk(e, role, pass, s.tokens, s.tp, n, k));
  }
  return steps.back();
}

// Userbuffers GEMM + reduce-scatter ("pipeline", initialize_ub's default of 4 splits): the GEMM in 4
// chunks of rows, each chunk's partial sums reduce-scattered by a userbuffers kernel while the next chunk
// computes; what follows waits for the last reduce-scatter.
constexpr int kPipelineSplits = 4;

void scattered_gemm(Emitter& e, OpRole role, std::int64_t n, std::int64_t k) {
  const RankShapes& s = e.shapes();
  cast_to_fp8(e, role, LinearTensor::input, s.tokens, k);
  OpIndex last_scatter = kNoOp;
  for (int chunk = 0; chunk < kPipelineSplits; ++chunk) {
    const OpIndex gemm = e.emit(gemm_chunk(e, role, GemmPass::forward, s.tokens, kPipelineSplits, n, k));
    last_scatter = e.emit_after(userbuffers_op(OpKind::reduce_scatter, OpRole::tp_scatter, s,
                                               activation_bytes(s) / kPipelineSplits, role, LinearTensor::output),
                                gemm);
  }
  e.pending_wait = last_scatter;
}

}  // namespace

// Without gradient accumulation fusion the weight-gradient GEMM writes a 16-bit gradient and a kernel adds it into
// the main gradient (Megatron's main_grad.add_ hook, every micro-batch, the first into the buffer zeroed at the
// step's start): read 2 bytes, read and write the main gradient's (framework.main_grad_dtype: core/framework.hpp
// main_gradient_bytes). The op names the linear whose weight gradient it adds (Op::linear; the GEMM of the same
// layer, micro-batch and chunk wrote it).
void accumulate_gradient(Emitter& e, OpIndex wgrad, OpRole role, std::int64_t parameters) {
  if (e.shapes().gradient_accumulation_fusion) return;
  Op add = Emitter::moved(OpKind::elementwise, OpRole::grad_accumulation,
                          parameters * (2 + 2 * static_cast<std::int64_t>(e.shapes().main_grad_bytes)));
  add.linear = role;
  e.emit_after(add, wgrad);
}

void column_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  if (tp_active(s) && s.tp_comm_overlap) {
    gathered_gemm(e, role, GemmPass::forward, LinearTensor::input, n_out, k_in);
    return;
  }
  reduce_gathered_amax(e, role, LinearTensor::input, s.tokens_local, k_in);
  cast_before_gather(e, role, LinearTensor::input, s.tokens_local, k_in);
  if (tp_active(s) && s.sp) e.emit(sp_gather(e, role, LinearTensor::input, k_in, e.fp8_linears()));
  e.emit(linear_gemm(e, role, GemmPass::forward, s.tokens, n_out, k_in));
}

void row_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  if (tp_active(s) && s.tp_comm_overlap) {
    scattered_gemm(e, role, n_out, k_in);
    return;
  }
  cast_to_fp8(e, role, LinearTensor::input, s.tokens, k_in);
  Op gemm = linear_gemm(e, role, GemmPass::forward, s.tokens, n_out, k_in);
  // Nothing comes between the product and the residual add without TP: the epilogue can add the stream. Not so for
  // the shared experts' FC2: the routed experts' combine adds to its output before the residual does.
  gemm.fuses_residual = s.residual_fusion && !tp_active(s) && role != OpRole::shared_expert_fc2;
  e.emit(gemm);
  if (tp_active(s))
    e.emit(s.sp ? tp_op(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s), role, LinearTensor::output)
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s), role, LinearTensor::output));
}

void column_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  // With userbuffers both collectives are "bulk": the gather beside dgrad, the reduce-scatter beside wgrad.
  const auto collective = s.tp_comm_overlap ? userbuffers_op : tp_op;
  OpIndex gathered_input = kNoOp;
  if (tp_active(s) && s.sp && !e.defers_weight_gradient) {  // the input again for wgrad: in FP8 where wgrad reads FP8
    Op gather = sp_gather(e, role, LinearTensor::input, k_in, fp8_wgrad(e));
    if (s.tp_comm_overlap) gather.comm_kernel = CommKernel::userbuffers_sm;
    gathered_input = e.emit_after(gather, e.chain);
  }
  cast_to_fp8(e, role, LinearTensor::output_gradient, s.tokens, n_out);
  const OpIndex dgrad = e.emit(linear_gemm(e, role, GemmPass::input_gradient, s.tokens, k_in, n_out));
  const std::int64_t input_gradient_bytes = s.tokens * k_in * 2;  // bf16, k_in wide (h but for MLA's up projections)
  if (tp_active(s))
    e.emit(s.sp ? collective(OpKind::reduce_scatter, OpRole::tp_scatter, s, input_gradient_bytes, role,
                             LinearTensor::input_gradient)
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, input_gradient_bytes, role,
                        LinearTensor::input_gradient));
  if (e.defers_weight_gradient) return;
  const OpIndex before_wgrad = transpose_gathered(e, role, LinearTensor::input, k_in, gathered_input, dgrad);
  const OpIndex wgrad =
      e.emit_after(linear_gemm(e, role, GemmPass::weight_gradient, k_in, n_out, s.tokens), before_wgrad);
  if (gathered_input != kNoOp) e.depend(gathered_input, wgrad);
  accumulate_gradient(e, wgrad, role, k_in * n_out);
}

void column_parallel_deferred_weight_gradient(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in,
                                              OpIndex gather_after) {
  const RankShapes& s = e.shapes();
  OpIndex gathered_input = kNoOp;
  if (tp_active(s) && s.sp)  // dist_all_gather_func: NCCL, not userbuffers, whatever tp_comm_overlap says
    gathered_input = e.emit_after(sp_gather(e, role, LinearTensor::input, k_in, false), gather_after);
  const OpIndex wgrad = e.emit(linear_gemm(e, role, GemmPass::weight_gradient, k_in, n_out, s.tokens));
  e.depend(gathered_input, wgrad);
  accumulate_gradient(e, wgrad, role, k_in * n_out);
}

void duplicated_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  cast_to_fp8(e, role, LinearTensor::input, s.tokens_local, k_in);
  e.emit(linear_gemm(e, role, GemmPass::forward, s.tokens_local, n_out, k_in));
}

void duplicated_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  cast_to_fp8(e, role, LinearTensor::output_gradient, s.tokens_local, n_out);
  const OpIndex dgrad = e.emit(linear_gemm(e, role, GemmPass::input_gradient, s.tokens_local, k_in, n_out));
  const OpIndex wgrad = e.emit_after(linear_gemm(e, role, GemmPass::weight_gradient, k_in, n_out, s.tokens_local), dgrad);
  accumulate_gradient(e, wgrad, role, k_in * n_out);
}

void row_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  OpIndex dgrad = kNoOp, gathered = kNoOp;
  if (tp_active(s) && s.tp_comm_overlap) {
    gathered = gathered_gemm(e, role, GemmPass::input_gradient, LinearTensor::output_gradient, k_in, n_out);
    dgrad = e.chain;
  } else {
    reduce_gathered_amax(e, role, LinearTensor::output_gradient, s.tokens_local, n_out);
    cast_before_gather(e, role, LinearTensor::output_gradient, s.tokens_local, n_out);
    OpIndex sp_gathered = kNoOp;
    if (tp_active(s) && s.sp)
      sp_gathered = e.emit(sp_gather(e, role, LinearTensor::output_gradient, n_out, e.fp8_linears()));
    dgrad = e.emit(linear_gemm(e, role, GemmPass::input_gradient, s.tokens, k_in, n_out));
    e.chain = transpose_gathered(e, role, LinearTensor::output_gradient, n_out, sp_gathered, dgrad);
  }
  const OpIndex wgrad = e.emit(linear_gemm(e, role, GemmPass::weight_gradient, k_in, n_out, s.tokens));
  e.depend(gathered, wgrad);
  accumulate_gradient(e, wgrad, role, k_in * n_out);
  e.chain = dgrad;
}

}  // namespace twin::lowering
