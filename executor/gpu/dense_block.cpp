// A dense layer's linears, their TP collectives, norms and residual adds. Shapes come from the op itself where it
// carries them (GEMM m, n, k; rows and columns), so the three GEMMs of a linear are exactly the op graph's
// (T,out,in), (T,in,out) and (in,out,T).
#include "executor/gpu/dense_block.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "executor/gpu/kernel_launch.hpp"
#include "executor/weight_residency.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {
namespace {

constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;

}  // namespace

// From the linear's block: a column-parallel linear gathers its input (SP) and reduces its input gradient;
// a row-parallel one's output is a residual branch, so its output gradient is the residual's output
// gradient, gathered (SP) before the backward GEMMs. The output projection's gradient is the loss's, written
// over the logits.
const layer::Block& dense_block_of(OpRole role, bool post_norms) {
  for (const layer::Block& block : layer::layer_blocks(false, false, post_norms))
    if (block.role == role) return block;
  return layer::block_of(role);
}

LinearTensors linear_tensors(OpRole subject, bool post_norms) {
  // An MoE layer's shared experts (Megatron's SharedExpertMLP) are its dense MLP beside the routed experts, in the
  // dense MLP's tensors (an MoE layer has none of its own): FC2 writes the branch the combine then adds the routed
  // rows to (executor/gpu/moe_actions.cpp), and FC1's input gradient is added to the routed experts' and the
  // router's, which are there first (the graph runs the shared experts' backward last).
  if (subject == OpRole::shared_expert_fc2) return linear_tensors(OpRole::fc2, post_norms);
  if (subject == OpRole::shared_expert_fc1) {
    LinearTensors t = linear_tensors(OpRole::fc1, post_norms);
    t.d_input_full = t.d_input;
    return t;
  }
  const layer::Block& block = layer::block_of(subject);
  const Tensor in = block.input, out = block.output;
  if (block.kind == layer::BlockKind::column_linear)
    return {{in}, {in, Form::gathered}, {out}, {out, Form::gradient}, {out, Form::gradient},
            {in, Form::gradient_partial}, {in, Form::gradient}};
  if (block.kind == layer::BlockKind::row_linear) {
    const Tensor stream = post_norms ? out : layer::residual_adding(out).output;
    return {{in}, {in}, {out}, {stream, Form::gradient}, {stream, Form::gradient_gathered}, {in, Form::gradient},
            {in, Form::gradient}};
  }
  throw std::logic_error("executor: " + to_string(subject) + " is not a linear layer");
}

namespace {

// A tensor's form if the unit holds it, else `otherwise`'s (a linear reads its gathered input where SP gathered it).
bf16* either(TensorStore& tensors, const OpPass& p, Act name, Act otherwise) {
  return static_cast<bf16*>(tensors.has(p.mb, p.unit, name) ? tensors.get(p.mb, p.unit, name)
                                                            : tensors.get(p.mb, p.unit, otherwise));
}

}  // namespace

DenseBlock::DenseBlock(const DenseStage& stage, cudaStream_t stream)
    : stage_(stage), attention_(std::make_unique<gpu::Attention>(stage.attention)) {
  if (!is_fused_attention(stage_.layout.scenario().model.attention_backend))
    unfused_ = std::make_unique<gpu::UnfusedAttention>();
  const lowering::RankShapes& shapes = stage_.layout.shapes();
  TensorStore& tensors = stage_.tensors;
  tokens_ = static_cast<std::int32_t*>(tensors.static_buffer(
      stage_.layout.strategy().num_micro_batches * (stage_.layout.input_tokens() + stage_.layout.target_tokens()) *
      sizeof(std::int32_t)));
  // Positions of the whole sequence: under context parallelism a rank's chunks sit anywhere in it.
  const std::int64_t positions = shapes.s * shapes.cp;
  rope_table_ = static_cast<float2*>(tensors.static_buffer(positions * (shapes.d / 2) * sizeof(float2)));
  // The model's base (Qwen3's 1,000,000; Llama 2's 10,000): until 2026-11-29 every model ran 10,000.
  kernels::rope_build_table(rope_table_, positions, static_cast<int>(shapes.d),
                            static_cast<float>(stage_.layout.scenario().model.rotary_base), stream);
  loss_sum_ = static_cast<float*>(tensors.static_buffer(sizeof(float)));
  for (ParameterUnit* unit : stage_.parameters.units())
    if (unit->id == kEmbeddingUnit) {
      embedding_workspace_bytes_ = kernels::embedding_backward_workspace_bytes(stage_.layout.input_tokens());
      embedding_workspace_ = tensors.static_buffer(embedding_workspace_bytes_);
    }
}

void DenseBlock::start_iteration(int iteration, const std::vector<std::int32_t>& tokens, cudaStream_t stream) {
  iteration_ = iteration;
  const auto expected = static_cast<std::size_t>(stage_.layout.strategy().num_micro_batches *
                                                 (stage_.layout.input_tokens() + stage_.layout.target_tokens()));
  if (tokens.size() != expected)
    throw std::invalid_argument(fmt::format("executor: {} input and target tokens given, {} expected", tokens.size(),
                                            expected));
  TWIN_CUDA_CHECK(cudaMemcpyAsync(tokens_, tokens.data(), tokens.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, stream));
  TWIN_CUDA_CHECK(cudaMemsetAsync(loss_sum_, 0, sizeof(float), stream));
}

double DenseBlock::loss_sum() const {
  float loss_sum = 0;
  TWIN_CUDA_CHECK(cudaMemcpy(&loss_sum, loss_sum_, sizeof(float), cudaMemcpyDeviceToHost));
  return loss_sum;
}

// Read per op, not kept: under ZeRO-3 (weights) and ZeRO >= 2 (gradients) the whole buffers exist only inside their
// windows (executor/weight_residency.hpp), each window a buffer of its own.
LinearWeight DenseBlock::linear_weight(OpRole subject, int unit) {
  const LinearHolder holder = linear_holder(
      subject, unit, !stage_.layout.scenario().model.untie_embeddings_and_output_weights,
      stage_holds_embedding(stage_.layout.strategy(), stage_.layout.me().pp));
  ParameterUnit& held = stage_.parameters.unit(holder.unit);
  const WeightTensor& w = held.tensor(holder.role);
  // Tied: the embedding table [vocab, hidden] where this stage holds it, else the table's copy.
  const std::int64_t in = holder.stored_out_by_in ? w.cols : w.rows, out = holder.stored_out_by_in ? w.rows : w.cols;
  return {held.params + w.offset, held.grads.at(w.offset), in, out, holder.stored_out_by_in, holder.unit, holder.role};
}

void DenseBlock::linear_forward(const OpPass& p) {
  const LinearTensors t = linear_tensors(p.binding.subject, branch_has_own_gradient());
  const LinearWeight w = linear_weight(p.binding.subject, p.unit);
  const std::int64_t m = p.op.gemm.m, n = p.op.gemm.n, k = p.op.gemm.k;
  if (k != w.in || n != w.out) throw std::logic_error("linear forward: GEMM shape differs from the weight's");
  TensorStore& tensors = stage_.tensors;
  bf16* input_full = either(tensors, p, t.input_full, t.input);
  bf16* bias = forward_bias(p);
  bf16* fused_bias = epilogue_vector_aligned(bias) ? bias : nullptr;  // added in the GEMM's epilogue
  const MatmulEpilogue epilogue = fused_bias != nullptr ? MatmulEpilogue::add_bias : MatmulEpilogue::none;
  if (p.op.fuses_residual) {  // the epilogue adds the residual stream: the product goes straight into the sum
    if (branch_has_own_gradient())
      throw std::logic_error("linear forward: a residual fused into a GEMM whose output is normalised or dropped out");
    const layer::Block& residual = layer::residual_adding(t.output.tensor);
    auto* sum = static_cast<bf16*>(tensors.make(p.mb, p.unit, {residual.output}, m * n * kBf16, p.stream));
    p.scratch.matmul->run({m, n, k, false, false, true, 1, epilogue}, input_full, w.params, sum, p.stream,
                          residual_stream(p, residual), fused_bias);
    if (bias != fused_bias) kernels::bias_add(sum, bias, m, n, p.stream);
    residual_forward_done(p, residual);
    return;
  }
  auto* out = static_cast<bf16*>(tensors.make(p.mb, p.unit, t.output, m * n * kBf16, p.stream));
  p.scratch.matmul->run({m, n, k, false, w.stored_out_by_in, false, 1, epilogue}, input_full, w.params, out,
                        p.stream, nullptr, fused_bias);
  if (bias != fused_bias) kernels::bias_add(out, bias, m, n, p.stream);
  // Under SP the gathered input is gathered again for the weight gradient (the graph says so): drop it.
  if (t.input_full != t.input && stage_.layout.layout(p.unit).shapes.sp)
    tensors.release(p.mb, p.unit, t.input_full, p.stream);
  release_for_module_recompute(p, p.binding.subject);
}

void DenseBlock::linear_input_grad(const OpPass& p) {
  const LinearTensors t = linear_tensors(p.binding.subject, branch_has_own_gradient());
  const LinearWeight w = linear_weight(p.binding.subject, p.unit);
  const std::int64_t m = p.op.gemm.m, n = p.op.gemm.n, k = p.op.gemm.k;
  if (n != w.in || k != w.out) throw std::logic_error("linear input gradient: GEMM shape differs from the weight's");
  const bool adds = p.binding.subject == OpRole::shared_expert_fc1;  // to the routed experts' part (above)
  auto* d_in = static_cast<bf16*>(adds ? stage_.tensors.get(p.mb, p.unit, t.d_input_full)
                                       : stage_.tensors.make(p.mb, p.unit, t.d_input_full, m * n * kBf16, p.stream));
  p.scratch.matmul->run({m, n, k, false, !w.stored_out_by_in, adds}, either(stage_.tensors, p, t.d_output_full,
                                                                            t.d_output),
                        w.params, d_in, p.stream);
}

void DenseBlock::linear_weight_grad(const OpPass& p) {
  const LinearTensors t = linear_tensors(p.binding.subject, branch_has_own_gradient());
  const LinearWeight w = linear_weight(p.binding.subject, p.unit);
  const std::int64_t m = p.op.gemm.m, n = p.op.gemm.n, k = p.op.gemm.k;
  if (m != w.in || n != w.out) throw std::logic_error("linear weight gradient: GEMM shape differs from the weight's");
  TensorStore& tensors = stage_.tensors;
  bf16* input_full = either(tensors, p, t.input_full, t.input);
  bf16* d_output_full = either(tensors, p, t.d_output_full, t.d_output);
  if (p.binding.gradient_apart) {  // weight then bias, stored or added by the grad_accumulation op after it
    const WeightTensor* bias = linear_bias_tensor(p);
    const std::int64_t elements = m * n + (bias ? bias->rows * bias->cols : 0);
    tensors.make(p.mb, p.unit, gradient_apart_name(p.binding.subject), elements * kBf16, p.stream);
  }
  const GradientTarget gradients = gradient_target(p);
  const bool accumulate = !gradients.store;
  // The gradient as stored: [out, in] = dY^T X, or [in, out] = X^T dY.
  MatmulProblem problem = w.stored_out_by_in ? MatmulProblem{n, m, k, true, false, accumulate}
                                             : MatmulProblem{m, n, k, true, false, accumulate};
  problem.f32_output = gradients.weight.type == kernels::GradType::f32;
  const kernels::GradRef bias_grad = fused_bias_grad(p, problem, w.stored_out_by_in);
  p.scratch.matmul->run_into_gradient(problem, w.stored_out_by_in ? d_output_full : input_full,
                                      w.stored_out_by_in ? input_full : d_output_full, gradients.weight, p.stream,
                                      bias_grad);
  if (bias_grad)
    finish_fused_bias_grad(p, n);
  else
    linear_bias_grad(p, d_output_full, k, n);
  if (t.input_full != t.input && stage_.layout.layout(p.unit).shapes.sp)
    tensors.release(p.mb, p.unit, t.input_full, p.stream);
  if (t.d_output_full != t.d_output) tensors.release(p.mb, p.unit, t.d_output_full, p.stream);
}

// The embedding's rows reduce into the unit's output, and its output's gradient comes back gathered.
void DenseBlock::gather_input(const OpPass& p) {
  const LinearTensors t = linear_tensors(p.binding.subject, branch_has_own_gradient());
  gather(p, t.input, t.input_full);
}

void DenseBlock::reduce_output(const OpPass& p) {
  if (p.binding.subject == OpRole::embedding) return reduce(p, {Tensor::embedded}, {Tensor::output});
  const LinearTensors t = linear_tensors(p.binding.subject, branch_has_own_gradient());
  reduce(p, t.output, {t.output.tensor, Form::reduced});
}

void DenseBlock::gather_output_grad(const OpPass& p) {
  if (p.binding.subject == OpRole::embedding)
    return gather(p, {Tensor::output, Form::next_norm_gradient}, {Tensor::output, Form::gradient_gathered});
  const LinearTensors t = linear_tensors(p.binding.subject, branch_has_own_gradient());
  gather(p, t.d_output, t.d_output_full);
}

void DenseBlock::reduce_input_grad(const OpPass& p) {
  const LinearTensors t = linear_tensors(p.binding.subject, branch_has_own_gradient());
  reduce(p, t.d_input_full, t.d_input);
}

void DenseBlock::gather(const OpPass& p, Act from, Act to) {
  if (p.op.kind != OpKind::all_gather) throw std::logic_error("executor: a TP gather that is not an all-gather");
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const std::int64_t local = layout.shapes.tokens_local * layout.shapes.h;
  void* source = stage_.tensors.get(p.mb, p.unit, from);
  void* gathered = stage_.tensors.make(p.mb, p.unit, to, local * layout.shapes.tp * kBf16, p.stream);
  TWIN_NCCL_CHECK(ncclAllGather(source, gathered, local, ncclBfloat16, layout.tensor, p.stream));
}

void DenseBlock::reduce(const OpPass& p, Act from, Act to) {
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& shapes = layout.shapes;
  const std::int64_t local = shapes.tokens_local * shapes.h;
  void* source = stage_.tensors.get(p.mb, p.unit, from);
  if (p.op.kind == OpKind::reduce_scatter) {
    void* reduced = stage_.tensors.make(p.mb, p.unit, to, local * kBf16, p.stream);
    TWIN_NCCL_CHECK(ncclReduceScatter(source, reduced, local, ncclBfloat16, ncclSum, layout.tensor, p.stream));
    return;
  }
  if (p.op.kind != OpKind::all_reduce) throw std::logic_error("executor: a TP reduction that is neither collective");
  TWIN_NCCL_CHECK(ncclAllReduce(source, source, shapes.tokens * shapes.h, ncclBfloat16, ncclSum, layout.tensor,
                                p.stream));
  stage_.tensors.alias(p.mb, p.unit, to, p.unit, from);
}

}  // namespace twin::exec
