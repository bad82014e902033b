// An FP8 tensor in the store is one buffer: the rowwise copy, the columnwise copy (each padded to 256 bytes) and
// the scaling record. The GEMM shapes come from the op, checked against the weight as the bf16 linears check them.
#include "executor/gpu/fp8_linears.hpp"

#include <stdexcept>

#include "executor/gpu/kernel_launch.hpp"
#include "gpu/fp8_matmul.hpp"

namespace twin::exec {
namespace {

constexpr std::int64_t kPad = 256;
std::int64_t padded(std::int64_t bytes) { return (bytes + kPad - 1) / kPad * kPad; }
std::size_t fp8_buffer_bytes(std::int64_t elements) {
  return static_cast<std::size_t>(2 * padded(elements) + kernels::kFp8ScalingFloats * sizeof(float));
}
Fp8Copies copies_in(void* buffer, std::int64_t elements) {
  auto* base = static_cast<std::uint8_t*>(buffer);
  return {base, base + padded(elements), reinterpret_cast<float*>(base + 2 * padded(elements))};
}

Act fp8_input(OpRole linear) { return {linear_tensors(linear).input.tensor, Form::fp8}; }
Act fp8_output_grad(OpRole linear) { return {linear_tensors(linear).d_output.tensor, Form::fp8_gradient}; }

}  // namespace

Fp8Linears::Fp8Linears(const Fp8Config& fp8, TensorStore& tensors, DenseBlock& dense, const RankClass& rc,
                       const std::vector<OpBinding>& bindings, cudaStream_t stream)
    : fp8_(fp8), tensors_(tensors), dense_(dense) {
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind == OpKind::fp8_cast && op.fp8_recipe != fp8.recipe)  // the states below are the recipe's
      throw std::logic_error("executor: an fp8_cast op of recipe " + to_string(op.fp8_recipe) + " in a plan of " +
                             to_string(fp8.recipe));
    if (op.kind != OpKind::gemm || !is_fp8(op.gemm) || bindings[i].action != Action::linear_forward) continue;
    const int unit = StageLayout::unit_of(op, bindings[i]);
    const auto key = std::pair{unit, bindings[i].subject};
    if (weights_.count(key)) continue;
    const LinearWeight w = dense_.linear_weight(bindings[i].subject, unit);
    if (w.stored_out_by_in) throw std::logic_error("executor: an FP8 linear whose weight is stored [out, in]");
    weights_.emplace(key, std::pair{w, copies_in(tensors_.static_buffer(fp8_buffer_bytes(w.in * w.out)), w.in * w.out)});
    if (fp8_.recipe != Fp8Recipe::delayed) continue;
    for (LinearTensor tensor : {LinearTensor::input, LinearTensor::output_gradient, LinearTensor::weight}) {
      auto* state = static_cast<float*>(
          tensors_.static_buffer(kernels::fp8_delayed_state_floats(fp8_.amax_history_len) * sizeof(float)));
      kernels::fp8_delayed_state_reset(state, fp8_.amax_history_len, stream);
      delayed_.emplace(std::tuple{unit, bindings[i].subject, tensor}, DelayedScale{state});
    }
  }
  cast_weights(fp8_.recipe, stream);  // before the first step: the recipe every cast op of the plan says (checked)
}

gpu::Fp8Cast fp8_cast_call(Fp8Recipe recipe, LinearTensor tensor, gpu::Fp8Cast call, DelayedScale* delayed,
                           int history_len, cudaStream_t stream) {
  call.recipe = recipe;
  switch (recipe) {
    case Fp8Recipe::tensorwise: return call;
    case Fp8Recipe::delayed: {
      if (delayed == nullptr) throw std::logic_error("executor: a delayed-scaling FP8 cast without its state");
      if (delayed->casts == 0) delayed->stream = stream;
      if (delayed->stream != stream)
        throw std::logic_error("executor: delayed FP8 scaling of one tensor cast on two streams (its history would race)");
      call.delayed_state = delayed->state;
      call.history_len = history_len;
      call.cast_index = delayed->casts++;
      return call;
    }
    case Fp8Recipe::blockwise:
      call.blocks = gpu::fp8_cast_blocks(recipe, tensor);
      return call;
    case Fp8Recipe::mxfp8: break;
  }
  throw std::logic_error("executor: an FP8 recipe the plan check refuses reached the FP8 linears");
}

gpu::Fp8Cast Fp8Linears::scaled(gpu::Fp8Cast call, Fp8Recipe recipe, int unit, OpRole linear, LinearTensor tensor,
                                cudaStream_t stream) {
  const auto state = delayed_.find({unit, linear, tensor});
  return fp8_cast_call(recipe, tensor, call, state == delayed_.end() ? nullptr : &state->second,
                       fp8_.amax_history_len, stream);
}

kernels::Fp8Type Fp8Linears::gradient_type() const {
  switch (fp8_.format) {
    case Fp8Format::e4m3: return kernels::Fp8Type::e4m3;
    case Fp8Format::hybrid: return kernels::Fp8Type::e5m2;
  }
  return kernels::Fp8Type::e4m3;
}

void Fp8Linears::cast_weights(Fp8Recipe recipe, cudaStream_t stream) {
  for (const auto& [key, weight] : weights_) {
    const auto& [w, copies] = weight;
    const gpu::Fp8Cast call{w.params, w.in, w.out, kernels::Fp8Type::e4m3, copies.rowwise, copies.columnwise,
                            copies.scaling};
    gpu::launch(scaled(call, recipe, key.first, key.second, LinearTensor::weight, stream), stream);
  }
}

Fp8Copies Fp8Linears::activation(const OpPass& p, Act name, std::int64_t elements, bool make) {
  void* buffer = make ? tensors_.make(p.mb, p.unit, name, fp8_buffer_bytes(elements), p.stream)
                      : tensors_.get(p.mb, p.unit, name);
  return copies_in(buffer, elements);
}

void Fp8Linears::cast(const OpPass& p) {
  const Op& op = p.op;
  if (op.linear_tensor == LinearTensor::weight) {  // after the optimizer step: the next step's weights
    if (op.kind != OpKind::fp8_cast) throw std::logic_error("executor: an FP8 weight cast that is no fp8_cast op");
    return cast_weights(op.fp8_recipe, p.stream);
  }
  const LinearTensors t = linear_tensors(p.binding.subject);
  const bool gradient = op.linear_tensor == LinearTensor::output_gradient;
  const Act source = gradient ? t.d_output : t.input;
  const Fp8Copies copies =
      activation(p, gradient ? fp8_output_grad(p.binding.subject) : fp8_input(p.binding.subject), op.rows * op.cols, true);
  const gpu::Fp8Cast call{static_cast<const bf16*>(tensors_.get(p.mb, p.unit, source)), op.rows, op.cols,
                          gradient ? gradient_type() : kernels::Fp8Type::e4m3, copies.rowwise,
                          op.fp8_columnwise ? copies.columnwise : nullptr, copies.scaling};
  launch_op(op, p.binding, scaled(call, op.fp8_recipe, p.unit, p.binding.subject, op.linear_tensor, p.stream),
            p.stream);
}

void Fp8Linears::forward(const OpPass& p) {
  const OpRole linear = p.binding.subject;
  const auto& [w, weight] = weights_.at({p.unit, linear});
  const std::int64_t m = p.op.gemm.m, n = p.op.gemm.n, k = p.op.gemm.k;
  if (k != w.in || n != w.out) throw std::logic_error("FP8 linear forward: GEMM shape differs from the weight's");
  const Fp8Copies x = activation(p, fp8_input(linear), m * k, false);
  auto* out = static_cast<bf16*>(tensors_.make(p.mb, p.unit, linear_tensors(linear).output, m * n * sizeof(bf16), p.stream));
  p.scratch.fp8_matmul->run({m, n, k, false, false, false}, x.rowwise, x.scale_inv(), weight.columnwise,
                            weight.scale_inv(), out, p.stream);
  if (!fp8_.wgrad) tensors_.release(p.mb, p.unit, fp8_input(linear), p.stream);
}

void Fp8Linears::input_grad(const OpPass& p) {
  const OpRole linear = p.binding.subject;
  const auto& [w, weight] = weights_.at({p.unit, linear});
  const std::int64_t m = p.op.gemm.m, n = p.op.gemm.n, k = p.op.gemm.k;
  if (n != w.in || k != w.out) throw std::logic_error("FP8 linear input gradient: GEMM shape differs from the weight's");
  const Fp8Copies dy = activation(p, fp8_output_grad(linear), m * k, false);
  auto* d_in =
      static_cast<bf16*>(tensors_.make(p.mb, p.unit, linear_tensors(linear).d_input_full, m * n * sizeof(bf16), p.stream));
  p.scratch.fp8_matmul->run({m, n, k, p.op.gemm.e5m2, false, false}, dy.rowwise, dy.scale_inv(), weight.rowwise,
                            weight.scale_inv(), d_in, p.stream);
  if (!fp8_.wgrad) tensors_.release(p.mb, p.unit, fp8_output_grad(linear), p.stream);
}

void Fp8Linears::weight_grad(const OpPass& p) {
  const OpRole linear = p.binding.subject;
  const LinearWeight& w = weights_.at({p.unit, linear}).first;
  const std::int64_t m = p.op.gemm.m, n = p.op.gemm.n, k = p.op.gemm.k;
  if (m != w.in || n != w.out) throw std::logic_error("FP8 linear weight gradient: GEMM shape differs from the weight's");
  const Fp8Copies x = activation(p, fp8_input(linear), m * k, false);
  const Fp8Copies dy = activation(p, fp8_output_grad(linear), n * k, false);
  p.scratch.fp8_matmul->run({m, n, k, false, p.op.gemm.e5m2, !p.binding.first_gradient}, x.columnwise, x.scale_inv(),
                            dy.columnwise, dy.scale_inv(), w.grads, p.stream);
  tensors_.release(p.mb, p.unit, fp8_input(linear), p.stream);
  tensors_.release(p.mb, p.unit, fp8_output_grad(linear), p.stream);
}

}  // namespace twin::exec
