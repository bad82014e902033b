// The interpreter's one dispatch: every action to the handler function that runs it. No `default:`, so the compiler
// names an action nobody runs.
#include <memory>
#include <stdexcept>
#include <string>

#include "executor/gpu/action_handlers.hpp"
#include "executor/gpu/ulysses_exchange.hpp"

namespace twin::exec {
namespace {

// A handler only some plans have (MoE, FP8, reductions across replicas): an op of one in a plan without it is a
// binding the plan should not have produced.
template <class Handler>
Handler& present(const std::unique_ptr<Handler>& handler, const char* op) {
  if (!handler) throw std::logic_error(std::string("executor: ") + op);
  return *handler;
}

}  // namespace

// Three actions only mark their place: phase_handoff (the process issues its parts in order), switch_transfer (the
// switch ran before the part's first op, LayoutSwitch::run) and pipelines_ring_step (the segment's reduction ran at
// its ring's first step).
void ActionHandlers::run(const OpPass& p) {
  const Op& op = p.op;
  const OpBinding& b = p.binding;
  DenseBlock& dense = *dense_;
  const auto moe = [this]() -> MoeBlock& { return present(moe_, "an experts-block op in a dense model"); };
  const auto pipelines = [this]() -> PipelineReductionRun& { return present(pipeline_reduction_, "no reductions"); };
  const auto fp8 = [this]() -> Fp8Linears& { return present(fp8_, "an FP8 op in a plan without training.fp8"); };
  const auto mla = [this]() -> MlaBlock& { return present(mla_, "an MLA op in a model without MLA"); };
  const bool fp8_gemm = op.kind == OpKind::gemm && is_fp8(op.gemm);  // the linear reads its FP8 copies
  switch (b.action) {
    case Action::linear_forward: return fp8_gemm ? fp8().forward(p) : dense.linear_forward(p);
    case Action::linear_input_grad: return fp8_gemm ? fp8().input_grad(p) : dense.linear_input_grad(p);
    case Action::linear_weight_grad: return fp8_gemm ? fp8().weight_grad(p) : dense.linear_weight_grad(p);
    case Action::grad_accumulation: return dense.accumulate_weight_gradient(p);
    case Action::fp8_cast: return fp8().cast(p);
    case Action::fp8_amax_reduce: return fp8().reduce_amaxes(p);
    case Action::fp8_gathered_amax: return fp8().reduce_gathered_amax(p);
    case Action::fp8_transpose: return fp8().transpose(p);
    case Action::gather_input: return op.fp8_payload ? fp8().gather(p) : dense.gather_input(p);
    case Action::reduce_output: return dense.reduce_output(p);
    case Action::gather_output_grad: return op.fp8_payload ? fp8().gather(p) : dense.gather_output_grad(p);
    case Action::reduce_input_grad: return dense.reduce_input_grad(p);
    case Action::norm_forward: return dense.norm_forward(p);
    case Action::norm_backward: return dense.norm_backward(p);
    case Action::residual_forward: return dense.residual_forward(p);
    case Action::residual_backward: return dense.residual_backward(p);
    case Action::rope_forward: return dense.rope_forward(p);
    case Action::rope_backward: return dense.rope_backward(p);
    case Action::attention_forward: return dense.attention_forward(p);
    case Action::attention_backward: return dense.attention_backward(p);
    case Action::activation_forward: return dense.activation_forward(p);
    case Action::activation_backward: return dense.activation_backward(p);
    case Action::loss_forward: return dense.loss_forward(p);
    case Action::loss_reduce: return dense.loss_reduce(p);
    case Action::loss_backward: return dense.loss_backward(p);
    case Action::embedding_forward: return dense.embedding_forward(p);
    case Action::embedding_backward: return dense.embedding_backward(p);
    case Action::send_activation: return boundary_->send_activation(p);
    case Action::recv_activation: return boundary_->recv_activation(p);
    case Action::send_gradient: return boundary_->send_gradient(p);
    case Action::recv_gradient: return boundary_->recv_gradient(p);
    case Action::send_strands: return boundary_->send_strands(p);
    case Action::recv_strands: return boundary_->recv_strands(p);
    case Action::grad_reduce: return optimizer_->grad_reduce(p);
    case Action::param_gather: return optimizer_->param_gather(p);
    case Action::embedding_grad_sync: return optimizer_->embedding_grad_sync(p);
    case Action::grad_norm: return optimizer_->grad_norm(p);
    case Action::optimizer_step: return optimizer_->optimizer_step(p);
    case Action::router_forward: return moe().router_forward(p);
    case Action::routing_counts_reduce: return moe().routing_counts_reduce(p);
    case Action::router_input_grad: return moe().router_input_grad(p);
    case Action::router_weight_grad: return moe().router_weight_grad(p);
    case Action::expert_dispatch: return moe().dispatch(p);
    case Action::expert_dispatch_backward: return moe().dispatch_backward(p);
    case Action::expert_forward: return moe().experts_forward(p);
    case Action::expert_input_grad: return moe().experts_input_grad(p);
    case Action::expert_weight_grad: return moe().experts_weight_grad(p);
    case Action::expert_activation_forward: return moe().activation_forward(p);
    case Action::expert_activation_backward: return moe().activation_backward(p);
    case Action::expert_combine: return moe().combine(p);
    case Action::expert_combine_backward: return moe().combine_backward(p);
    case Action::dispatch_exchange: return moe().dispatch_exchange(p);
    case Action::combine_exchange: return moe().combine_exchange(p);
    case Action::dispatch_exchange_backward: return moe().dispatch_exchange_backward(p);
    case Action::combine_exchange_backward: return moe().combine_exchange_backward(p);
    case Action::ring_attention_forward: return ring_->attention_forward(p);
    case Action::ring_attention_backward: return ring_->attention_backward(p);
    case Action::ring_exchange: case Action::ring_exchange_backward: return ring_->exchange(p);
    case Action::ring_merge: return ring_->merge(p);
    case Action::ring_gradient_add: return ring_->gradient_add(p);
    case Action::ulysses_to_heads: case Action::ulysses_to_sequence:
      return ulysses_exchange(p, layout_.layout(p.unit), tensors_);
    case Action::pipelines_reduce: return pipelines().reduce(op.ring_segment, parameters_, p.stream);
    case Action::pipelines_gather: return pipelines().gather(op.ring_segment, parameters_, p.stream);
    case Action::phase_handoff: case Action::switch_transfer: case Action::pipelines_ring_step: return;  // marks
    case Action::mla_step: return mla().run(p);
  }
}

}  // namespace twin::exec
