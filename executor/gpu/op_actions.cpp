// What each bound op does with tensors. Shapes come from the op itself where it carries them (GEMM m, n,
// k; rows and columns) and from the rank's shapes otherwise; layouts are row-major, linears y = x W with
// W stored [in, out], so the three GEMMs of a linear are exactly the op graph's (T,out,in), (T,in,out)
// and (in,out,T).
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "core/layer.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {
namespace {

constexpr std::size_t kBf16 = sizeof(bf16);

ncclDataType_t nccl_bf16() { return ncclBfloat16; }

using layer::Tensor;

// The tensors of one linear layer in its unit's slot.
struct LinearTensors {
  Act input, input_full, output;      // forward: output = input_full W
  Act d_output, d_output_full;        // backward: d_input_full = d_output_full W^T
  Act d_input_full, d_input;          // d_input: after the TP reduction (or the same tensor without one)
};

// From the linear's block: a column-parallel linear gathers its input (SP) and reduces its input gradient;
// a row-parallel one's output is a residual branch, so its output gradient is the residual's output
// gradient, gathered (SP) before the backward GEMMs. The output projection's gradient is the loss's, written
// over the logits.
LinearTensors linear_tensors(OpRole subject) {
  const layer::Block& block = layer::block_of(subject);
  const Tensor in = block.input, out = block.output;
  if (block.kind == layer::BlockKind::column_linear)
    return {{in}, {in, Form::gathered}, {out}, {out, Form::gradient}, {out, Form::gradient},
            {in, Form::gradient_partial}, {in, Form::gradient}};
  if (block.kind == layer::BlockKind::row_linear) {
    const Tensor stream = layer::residual_adding(out).output;
    return {{in}, {in}, {out}, {stream, Form::gradient}, {stream, Form::gradient_gathered}, {in, Form::gradient},
            {in, Form::gradient}};
  }
  throw std::logic_error("executor: " + to_string(subject) + " is not a linear layer");
}

}  // namespace

int StageRuntime::unit_of(const Op& op, const OpBinding& b) const {
  if (op.layer >= 0) return op.layer;
  if (b.subject == OpRole::embedding || op.role == OpRole::embedding) return kEmbeddingUnit;
  return kHeadUnit;
}

int StageRuntime::previous_unit(int unit, int chunk) const {
  const auto [first, end] = chunk_layers_.at(chunk);
  if (unit == kHeadUnit) return end - 1;
  if (unit > first) return unit - 1;
  const int virtual_stage = virtual_stage_of(strategy_, me_.pp, chunk);
  if (virtual_stage == 0) return kEmbeddingUnit;
  // The virtual stage before it on this stage (double strand's fold turns on the last stage: its mirror chunk
  // follows its first) hands its last layer's output over in memory; otherwise it arrives by p2p.
  for (const auto& [other, layers] : chunk_layers_)
    if (virtual_stage_of(strategy_, me_.pp, other) == virtual_stage - 1) return layers.second - 1;
  return kReceivedUnit - chunk;
}

void StageRuntime::run_op(OpIndex index, int iteration) {
  const Op& op = rc_.op(index);
  const OpBinding& b = bindings_[index];
  cudaStream_t stream = streams_[static_cast<int>(op.stream)];
  const int mb = op.micro_batch;
  switch (b.action) {
    case Action::linear_forward:
    case Action::linear_input_grad:
    case Action::linear_weight_grad: return linear(op, b, mb, unit_of(op, b), stream);
    case Action::gather_input:
    case Action::reduce_output:
    case Action::gather_output_grad:
    case Action::reduce_input_grad: return tensor_collective(op, b, mb, unit_of(op, b), stream);
    case Action::norm_forward:
    case Action::norm_backward: return norm(op, b, mb, unit_of(op, b), stream);
    case Action::residual_forward:
    case Action::residual_backward: return residual(op, b, mb, unit_of(op, b), stream);
    case Action::rope_forward:
    case Action::rope_backward:
    case Action::attention_forward:
    case Action::attention_backward:
    case Action::activation_forward:
    case Action::activation_backward: return between_linears(op, b, mb, unit_of(op, b), stream);
    case Action::loss_forward:
    case Action::loss_reduce:
    case Action::loss_backward: return head(op, b, mb, stream);
    case Action::embedding_forward:
    case Action::embedding_backward: return embedding(op, b, mb, stream);
    case Action::send_activation:
    case Action::recv_activation:
    case Action::send_gradient:
    case Action::recv_gradient:
    case Action::send_strands:
    case Action::recv_strands: return pipeline(op, b, mb, stream);
    case Action::grad_reduce:
    case Action::param_gather:
    case Action::embedding_grad_sync:
    case Action::grad_norm: return parameters_collective(op, b, stream);
    case Action::optimizer_step: return optimizer(op, b, stream);
    case Action::router_forward: return moe_block().router_forward(moe_pass(op, b, stream));
    case Action::routing_counts_reduce: return moe_block().routing_counts_reduce(moe_pass(op, b, stream));
    case Action::router_input_grad: return moe_block().router_input_grad(moe_pass(op, b, stream));
    case Action::router_weight_grad: return moe_block().router_weight_grad(moe_pass(op, b, stream));
    case Action::expert_dispatch: return moe_block().dispatch(moe_pass(op, b, stream));
    case Action::expert_dispatch_backward: return moe_block().dispatch_backward(moe_pass(op, b, stream));
    case Action::expert_forward: return moe_block().experts_forward(moe_pass(op, b, stream));
    case Action::expert_input_grad: return moe_block().experts_input_grad(moe_pass(op, b, stream));
    case Action::expert_weight_grad: return moe_block().experts_weight_grad(moe_pass(op, b, stream));
    case Action::expert_activation_forward: return moe_block().activation_forward(moe_pass(op, b, stream));
    case Action::expert_activation_backward: return moe_block().activation_backward(moe_pass(op, b, stream));
    case Action::expert_combine: return moe_block().combine(moe_pass(op, b, stream));
    case Action::expert_combine_backward: return moe_block().combine_backward(moe_pass(op, b, stream));
    case Action::dispatch_exchange: return moe_block().dispatch_exchange(moe_pass(op, b, stream));
    case Action::combine_exchange: return moe_block().combine_exchange(moe_pass(op, b, stream));
    case Action::dispatch_exchange_backward: return moe_block().dispatch_exchange_backward(moe_pass(op, b, stream));
    case Action::combine_exchange_backward: return moe_block().combine_exchange_backward(moe_pass(op, b, stream));
    case Action::ring_attention_forward: return ring_->attention_forward(ring_pass(op, b, stream));
    case Action::ring_attention_backward: return ring_->attention_backward(ring_pass(op, b, stream));
    case Action::ring_exchange:
    case Action::ring_exchange_backward: return ring_->exchange(ring_pass(op, b, stream));
    case Action::ring_merge: return ring_->merge(ring_pass(op, b, stream));
    case Action::ring_gradient_add: return ring_->gradient_add(ring_pass(op, b, stream));
    case Action::ulysses_to_heads:
    case Action::ulysses_to_sequence: return ulysses_exchange(op, b, mb, unit_of(op, b), stream);
    case Action::phase_handoff: return;  // the process issues its parts in order
    case Action::switch_transfer: return;  // the switch ran before the part's first op (StageRuntime::switch_into)
    case Action::pipelines_reduce:
      if (!pipeline_reduction_) throw std::logic_error("executor: a ring across pipelines without its reductions");
      return pipeline_reduction_->reduce(op.ring_segment, *params_, stream);
    case Action::pipelines_gather:
      if (!pipeline_reduction_) throw std::logic_error("executor: a ring across pipelines without its reductions");
      return pipeline_reduction_->gather(op.ring_segment, *params_, stream);
    case Action::pipelines_ring_step: return;  // the segment's reduction ran at its ring's first step
  }
}

MoeBlock& StageRuntime::moe_block() {
  if (!moe_) throw std::logic_error("executor: an experts-block op in a dense model");
  return *moe_;
}

MoePass StageRuntime::moe_pass(const Op& op, const OpBinding& b, cudaStream_t stream) {
  return {op, b, op.micro_batch, unit_of(op, b), scratch(op), stream};
}

RingPass StageRuntime::ring_pass(const Op& op, const OpBinding& b, cudaStream_t stream) const {
  return {op, b, op.micro_batch, unit_of(op, b), stream};
}

StageRuntime::LinearWeight StageRuntime::linear_weight(OpRole subject, int unit) {
  if (subject == OpRole::output_projection && !scenario_.model.untie_embeddings_and_output_weights) {
    // Tied: the embedding table [vocab, hidden] where this stage holds it, else the table's copy.
    const bool table_here = stage_holds_embedding(strategy_, me_.pp);
    const int holder_unit = table_here ? kEmbeddingUnit : kHeadUnit;
    const OpRole role = table_here ? OpRole::embedding : OpRole::output_projection;
    ParameterUnit& holder = params_->unit(holder_unit);
    const WeightTensor& w = holder.tensor(role);
    return {holder.params + w.offset, holder.grads + w.offset, w.cols, w.rows, true, holder_unit, role};
  }
  ParameterUnit& parameters = params_->unit(unit);
  const WeightTensor& w = parameters.tensor(subject);
  return {parameters.params + w.offset, parameters.grads + w.offset, w.rows, w.cols, false, unit, subject};
}

void StageRuntime::linear(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const LinearTensors t = linear_tensors(b.subject);
  const LinearWeight w = linear_weight(b.subject, unit);
  bf16* weight = w.params;
  Matmul& matmul = *scratch(op).matmul;
  const auto input_full = [&] { return static_cast<bf16*>(tensors_.has(mb, unit, t.input_full) ? tensors_.get(mb, unit, t.input_full)
                                                                                       : tensors_.get(mb, unit, t.input)); };
  const auto d_output_full = [&] {
    return static_cast<bf16*>(tensors_.has(mb, unit, t.d_output_full) ? tensors_.get(mb, unit, t.d_output_full)
                                                             : tensors_.get(mb, unit, t.d_output));
  };
  const std::int64_t m = op.gemm.m, n = op.gemm.n, k = op.gemm.k;
  if (b.action == Action::linear_forward) {
    if (k != w.in || n != w.out) throw std::logic_error("linear forward: GEMM shape differs from the weight's");
    if (op.fuses_residual) {  // the epilogue adds the residual stream: the product goes straight into the sum
      const layer::Block& residual = layer::residual_adding(t.output.tensor);
      auto* sum = static_cast<bf16*>(tensors_.make(mb, unit, {residual.output}, m * n * kBf16, stream));
      matmul.run({m, n, k, false, false, true}, input_full(), weight, sum, stream,
                 residual_stream(mb, unit, op.chunk, residual));
      residual_forward_done(op, mb, unit, residual, stream);
      return;
    }
    auto* out = static_cast<bf16*>(tensors_.make(mb, unit, t.output, m * n * kBf16, stream));
    matmul.run({m, n, k, false, w.stored_out_by_in, false}, input_full(), weight, out, stream);
    // Under SP the gathered input is gathered again for the weight gradient (the graph says so): drop it.
    if (t.input_full != t.input && layout(unit).shapes.sp) tensors_.release(mb, unit, t.input_full, stream);
  } else if (b.action == Action::linear_input_grad) {
    if (n != w.in || k != w.out) throw std::logic_error("linear input gradient: GEMM shape differs from the weight's");
    auto* d_in = static_cast<bf16*>(tensors_.make(mb, unit, t.d_input_full, m * n * kBf16, stream));
    matmul.run({m, n, k, false, !w.stored_out_by_in, false}, d_output_full(), weight, d_in, stream);
  } else {
    if (m != w.in || n != w.out) throw std::logic_error("linear weight gradient: GEMM shape differs from the weight's");
    if (w.stored_out_by_in)  // the gradient as stored, [out, in]: dY^T X
      matmul.run({n, m, k, true, false, !b.first_gradient}, d_output_full(), input_full(), w.grads, stream);
    else
      matmul.run({m, n, k, true, false, !b.first_gradient}, input_full(), d_output_full(), w.grads, stream);
    if (t.input_full != t.input && layout(unit).shapes.sp) tensors_.release(mb, unit, t.input_full, stream);
    if (t.d_output_full != t.d_output) tensors_.release(mb, unit, t.d_output_full, stream);
  }
}

void StageRuntime::tensor_collective(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const UnitLayout& layout = this->layout(unit);
  ncclComm_t comm = layout.tensor;
  const lowering::RankShapes& shapes = layout.shapes;
  const std::int64_t local = shapes.tokens_local * shapes.h;
  // (source, destination) tensor names in the unit's slot.
  Act from = kNoAct, to = kNoAct;
  if (b.subject == OpRole::embedding) {  // its rows reduce into the unit's output; the gradient comes back
    if (b.action == Action::reduce_output) from = {Tensor::embedded}, to = {Tensor::output};
    if (b.action == Action::gather_output_grad)
      from = {Tensor::output, Form::next_norm_gradient}, to = {Tensor::output, Form::gradient_gathered};
  } else {
    const LinearTensors t = linear_tensors(b.subject);
    switch (b.action) {
      case Action::gather_input: from = t.input, to = t.input_full; break;
      case Action::reduce_output: from = t.output, to = {t.output.tensor, Form::reduced}; break;
      case Action::gather_output_grad: from = t.d_output, to = t.d_output_full; break;
      case Action::reduce_input_grad: from = t.d_input_full, to = t.d_input; break;
      default: break;
    }
  }
  if (from == kNoAct) throw std::logic_error("executor: no tensors for " + to_string(b.action));
  void* source = tensors_.get(mb, unit, from);
  switch (op.kind) {
    case OpKind::all_gather:
      TWIN_NCCL_CHECK(ncclAllGather(source, tensors_.make(mb, unit, to, local * shapes.tp * kBf16, stream), local, nccl_bf16(),
                                    comm, stream));
      break;
    case OpKind::reduce_scatter:
      TWIN_NCCL_CHECK(ncclReduceScatter(source, tensors_.make(mb, unit, to, local * kBf16, stream), local, nccl_bf16(),
                                        ncclSum, comm, stream));
      break;
    case OpKind::all_reduce:
      TWIN_NCCL_CHECK(ncclAllReduce(source, source, shapes.tokens * shapes.h, nccl_bf16(), ncclSum, comm, stream));
      tensors_.alias(mb, unit, to, unit, from);
      break;
    default: throw std::logic_error("executor: unexpected tensor-parallel collective");
  }
}

void StageRuntime::norm(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const std::int64_t rows = op.rows, cols = op.cols;
  ParameterUnit& parameters = params_->unit(unit);
  const WeightTensor& w = parameters.tensor(b.subject);
  const bf16* weight = parameters.params + w.offset;
  const layer::Block& block = layer::block_of(b.subject);
  const int chunk = op.chunk;
  // The normalised tensor: the unit's input (the previous unit's output), or a tensor of the unit itself.
  const bool unit_input = block.input == Tensor::input;
  const auto* x = static_cast<const bf16*>(unit_input ? tensors_.get(mb, previous_unit(unit, chunk), {Tensor::output})
                                                      : tensors_.get(mb, unit, {block.input}));
  const Act out{block.output}, rstd{block.stats};
  if (b.action == Action::norm_forward) {
    auto* y = static_cast<bf16*>(tensors_.make(mb, unit, out, rows * cols * kBf16, stream));
    auto* r = static_cast<float*>(tensors_.make(mb, unit, rstd, rows * sizeof(float), stream));
    launch_op(op, b, gpu::NormForward{op.normalization, x, weight, nullptr, y, nullptr, r, rows, cols}, stream);
    return;
  }
  const Act d_reduced{block.output, Form::gradient}, d_full{block.output, Form::gradient_partial};
  const auto* dy = static_cast<const bf16*>(tensors_.has(mb, unit, d_reduced) ? tensors_.get(mb, unit, d_reduced) : tensors_.get(mb, unit, d_full));
  // A norm inside the unit: its input gradient is the start of that tensor's gradient (the residual
  // backward adds the skip path's), or all of it when the norm backward adds the skip path's itself.
  const Act dx_name{block.input, Form::gradient};
  const Act skip{layer::residual_reading(block.input).output, Form::gradient};
  auto* dx = static_cast<bf16*>(tensors_.make(mb, unit, dx_name, rows * cols * kBf16, stream));
  launch_op(op, b,
            gpu::NormBackward{op.normalization, dy, x, weight, nullptr, static_cast<const float*>(tensors_.get(mb, unit, rstd)),
                              op.fuses_residual ? static_cast<const bf16*>(tensors_.get(mb, unit, skip)) : nullptr, dx,
                              scratch(op).norm_partials, parameters.grads + w.offset, nullptr,
                              /*accumulate=*/!b.first_gradient, rows, cols},
            stream);
  if (op.fuses_residual) tensors_.release(mb, unit, skip, stream);
  if (!unit_input) {
    tensors_.release(mb, unit, d_reduced, stream);
    tensors_.release(mb, unit, d_full, stream);
    return;
  }
  // The unit's first norm: its backward ends; the input gradient goes to the unit before it, through its
  // norm and (in a layer) through the residual stream: the gradient of the residual reading the input.
  const int before = previous_unit(unit, chunk);
  const Act to_norm{Tensor::output, Form::next_norm_gradient}, to_residual{Tensor::output, Form::next_residual_gradient};
  if (unit == kHeadUnit) {
    tensors_.move(mb, unit, dx_name, before, arriving_output_gradient());
  } else if (op.fuses_residual) {  // dx is the whole gradient
    tensors_.move(mb, unit, dx_name, before, before >= 0 ? arriving_output_gradient() : to_norm);
  } else {
    if (before >= 0) {
      tensors_.move(mb, unit, dx_name, before, to_norm);
      tensors_.move(mb, unit, skip, before, to_residual);
    } else {  // no residual op follows the chunk's first layer: add the residual stream's part here
      kernels::residual_add(dx, static_cast<const bf16*>(tensors_.get(mb, unit, skip)), dx, rows * cols, stream);
      tensors_.move(mb, unit, dx_name, before, to_norm);
    }
  }
  tensors_.release_slot(mb, unit, stream);
}

const bf16* StageRuntime::residual_stream(int mb, int unit, int chunk, const layer::Block& residual) {
  const bool unit_input = residual.input == Tensor::input;
  return static_cast<const bf16*>(unit_input ? tensors_.get(mb, previous_unit(unit, chunk), {Tensor::output})
                                             : tensors_.get(mb, unit, {residual.input}));
}

void StageRuntime::residual_forward_done(const Op& op, int mb, int unit, const layer::Block& residual,
                                         cudaStream_t stream) {
  // Full recompute keeps only the layer's output until its backward runs the forward again.
  if (residual.output == Tensor::output && !op.recomputed && recompute_of(op.layer) == Recompute::full)
    tensors_.release_slot(mb, unit, stream, {Tensor::output});
}

Act StageRuntime::arriving_output_gradient() const {
  return shapes_.residual_fusion ? Act{Tensor::output, Form::gradient} : Act{Tensor::output, Form::next_norm_gradient};
}

// output = input + branch (the branch after its TP reduction). Backward: the output's gradient is the
// branch's (linear_tensors reads it there); the skip path adds it to the input's gradient.
void StageRuntime::residual(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const std::int64_t count = shapes_.tokens_local * shapes_.h;
  const layer::Block& block = layer::block_of(b.subject);
  if (b.action == Action::residual_forward) {
    const Act reduced{block.branch, Form::reduced}, branch_out{block.branch};
    const Act branch = tensors_.has(mb, unit, reduced) ? reduced : branch_out;
    auto* y = static_cast<bf16*>(tensors_.make(mb, unit, {block.output}, count * kBf16, stream));
    launch_op(op, b,
              gpu::Elementwise{residual_stream(mb, unit, op.chunk, block),
                               static_cast<const bf16*>(tensors_.get(mb, unit, branch)), y, count},
              stream);
    tensors_.release(mb, unit, reduced, stream);
    tensors_.release(mb, unit, branch_out, stream);
    residual_forward_done(op, mb, unit, block, stream);
    return;
  }
  const Act d_output{block.output, Form::gradient};
  if (block.output == Tensor::output) {  // the unit's output gradient: through the next unit's norm + its stream
    tensors_.move(mb, unit, {Tensor::output, Form::next_norm_gradient}, unit, d_output);
    const Act stream_part{Tensor::output, Form::next_residual_gradient};
    if (tensors_.has(mb, unit, stream_part)) {
      auto* dy = static_cast<bf16*>(tensors_.get(mb, unit, d_output));
      launch_op(op, b, gpu::Elementwise{dy, static_cast<const bf16*>(tensors_.get(mb, unit, stream_part)), dy, count}, stream);
      tensors_.release(mb, unit, stream_part, stream);
    }
    return;
  }
  // Inside the unit: the norm reading this output gave its part; the skip path of the next residual adds its
  // output's gradient.
  const Act skip{layer::residual_reading(block.output).output, Form::gradient};
  auto* d_out = static_cast<bf16*>(tensors_.get(mb, unit, d_output));
  launch_op(op, b, gpu::Elementwise{d_out, static_cast<const bf16*>(tensors_.get(mb, unit, skip)), d_out, count}, stream);
  tensors_.release(mb, unit, skip, stream);
}

}  // namespace twin::exec
