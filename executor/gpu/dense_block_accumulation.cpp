// A linear's weight gradient without gradient accumulation fusion (framework.gradient_accumulation_fusion false):
// its GEMM writes the weight's and the bias's gradients to a tensor of their own, and the grad_accumulation op after
// it adds them into the gradients through the elementwise entry (the kernel calibration times for the op), as
// Megatron's main_grad.add_ hook does after autograd wrote param.grad: every micro-batch's, the first's too, into
// gradients the step zeroed at its start (StageRuntime::gradients_need_zeroing, as Megatron's zero_grad_buffer).
#include <cuda_runtime.h>

#include <stdexcept>

#include <fmt/format.h>

#include "executor/gpu/dense_block.hpp"
#include "executor/gpu/kernel_launch.hpp"

namespace twin::exec {

using bf16 = __nv_bfloat16;

// Named after the linear's output tensor: one per linear of a unit and micro-batch.
Act DenseBlock::gradient_apart_name(OpRole linear) const {
  return {linear_tensors(linear, branch_has_own_gradient()).output.tensor, Form::weight_gradient_apart};
}

DenseBlock::GradientTarget DenseBlock::gradient_target(const OpPass& p) {
  const LinearWeight w = linear_weight(p.binding.subject, p.unit);
  const WeightTensor* bias = linear_bias_tensor(p);
  if (!p.binding.gradient_apart)
    return {w.grads, bias ? stage_.parameters.unit(p.unit).grads.at(bias->offset) : kernels::GradRef{},
            p.binding.first_gradient};
  // Apart, the gradient is bf16 whatever the main gradient's type (Megatron's param.grad is the weight's dtype).
  auto* apart = static_cast<bf16*>(stage_.tensors.get(p.mb, p.unit, gradient_apart_name(p.binding.subject)));
  return {apart, bias ? kernels::GradRef{apart + w.in * w.out} : kernels::GradRef{}, true};
}


void DenseBlock::accumulate_weight_gradient(const OpPass& p) {
  const LinearWeight w = linear_weight(p.binding.subject, p.unit);
  const WeightTensor* bias = linear_bias_tensor(p);
  const GradientTarget gradients = gradient_target(p);  // the op's binding is not apart: the gradients themselves
  const std::int64_t weight_elements = w.in * w.out;
  // Reads the bf16 gradient apart, reads and writes the main gradient.
  const auto add_bytes =
      static_cast<std::int64_t>(sizeof(bf16) + 2 * gradients.weight.element_bytes()) * weight_elements;
  if (p.op.bytes != add_bytes)
    throw std::logic_error(fmt::format("gradient accumulation of {}: {} bytes priced, the add of {} elements "
                                       "moves {}", to_string(p.binding.subject), p.op.bytes, weight_elements,
                                       add_bytes));
  const Act name = gradient_apart_name(p.binding.subject);
  const auto* apart = static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, name));
  gpu::Elementwise add{.b = apart, .count = weight_elements};
  add.gradient = gradients.weight;
  launch_op(p.op, p.binding, add, p.stream);
  if (bias) {
    add.b = apart + weight_elements;
    add.count = bias->rows * bias->cols;
    add.gradient = gradients.bias;
    launch_op(p.op, p.binding, add, p.stream);
  }
  stage_.tensors.release(p.mb, p.unit, name, p.stream);
}

}  // namespace twin::exec
