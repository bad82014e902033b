// QK-norm in a layer (executor/gpu/qk_norm.hpp): its forward saves the query and key heads, then normalises them in
// place in the QKV rows that RoPE and attention read; its backward runs after RoPE's, in place on their gradient.
// A layer's rows run as one group (rows pack sequences or not: the norm is per token and head).
#include <stdexcept>

#include "executor/gpu/dense_block.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/qk_norm.hpp"

namespace twin::exec {
namespace {

// The saved heads and, after them, the statistics: one buffer, released at once.
constexpr Act kSaved{layer::Tensor::qkv, Form::before_qk_norm};  // the core attention block's input

QkNormShape qk_shape(const UnitLayout& layout, const Op& op) {
  const lowering::RankShapes& s = layout.shapes;
  if (layout.ulysses) throw std::logic_error("executor: QK-norm in a Ulysses layer (its lowering emits none)");
  const QkNormShape shape{s.tokens, s.heads, s.groups, s.d, s.qkv_width};
  if (op.rows != shape.rows() || op.cols != s.d)
    throw std::logic_error("executor: a QK-norm op whose rows are not the layer's query and key heads");
  return shape;
}

// The heads' bytes rounded up to 16 (the statistics' floats start aligned), then a float per head and token.
std::size_t heads_bytes(const QkNormShape& shape) {
  return (static_cast<std::size_t>(shape.tokens * shape.saved_width()) * sizeof(bf16) + 15) / 16 * 16;
}
std::size_t saved_bytes(const QkNormShape& shape) {
  return heads_bytes(shape) + static_cast<std::size_t>(shape.rows()) * sizeof(float);
}
float* stats_after(bf16* saved, const QkNormShape& shape) {
  return reinterpret_cast<float*>(reinterpret_cast<char*>(saved) + heads_bytes(shape));
}

}  // namespace

void DenseBlock::qk_norm_forward(const OpPass& p) {
  const QkNormShape shape = qk_shape(stage_.layout.layout(p.unit), p.op);
  TensorStore& tensors = stage_.tensors;
  auto* qkv = static_cast<bf16*>(tensors.get(p.mb, p.unit, {layer::block_of(OpRole::core_attention).input}));
  auto* saved = static_cast<bf16*>(tensors.make(p.mb, p.unit, kSaved, saved_bytes(shape), p.stream));
  auto* rstd = stats_after(saved, shape);
  save_query_and_key(qkv, saved, shape, p.stream);
  const ParameterUnit& parameters = stage_.parameters.unit(p.unit);
  const WeightTensor& w = parameters.tensor(OpRole::qk_norm);
  launch_op(p.op, p.binding, qk_norm_forward_call(qkv, parameters.params + w.offset, rstd, shape), p.stream);
}

void DenseBlock::qk_norm_backward(const OpPass& p) {
  const QkNormShape shape = qk_shape(stage_.layout.layout(p.unit), p.op);
  TensorStore& tensors = stage_.tensors;
  const Act d_qkv_name{layer::block_of(OpRole::core_attention).input, Form::gradient};
  auto* d_qkv = static_cast<bf16*>(tensors.get(p.mb, p.unit, d_qkv_name));
  auto* saved = static_cast<bf16*>(tensors.get(p.mb, p.unit, kSaved));
  const float* rstd = stats_after(saved, shape);
  const ParameterUnit& parameters = stage_.parameters.unit(p.unit);
  const WeightTensor& w = parameters.tensor(OpRole::qk_norm);
  launch_op(p.op, p.binding,
            qk_norm_backward_call(d_qkv, saved, parameters.params + w.offset, rstd, p.scratch.norm_partials,
                                  parameters.grads.at(w.offset), !p.binding.first_gradient, shape),
            p.stream);
  tensors.release(p.mb, p.unit, kSaved, p.stream);
}

}  // namespace twin::exec
