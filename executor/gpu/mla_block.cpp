// Where each step's tensors live: the forward's saved tensors under the block's statistics tensor from its first
// step to the backward's last, the kv rows from kv_down to the expansion, the backward's gradient rows through the
// backward; o (the projection's input) and its gradient (the projection's input gradient) until attention's
// backward; the input's gradient written by kv_down's input gradient, added to by the query's.
#include "executor/gpu/mla_block.hpp"

#include <stdexcept>
#include <tuple>

#include "executor/mla_layout.hpp"

namespace twin::exec {
namespace {

using layer::Tensor;
using kernels::bf16;

constexpr Act kInput{Tensor::input_norm_out}, kInputGrad{Tensor::input_norm_out, Form::gradient};
constexpr Act kOutput{Tensor::attention_out}, kOutputGrad{Tensor::attention_out, Form::gradient};
constexpr Act kSaved{Tensor::attention_stats};
constexpr Act kRows{Tensor::attention_out, Form::between_steps};
constexpr Act kGradRows{Tensor::attention_out, Form::gradient_between_steps};

bool uses_forward_rows(MlaStep step) {
  return step == MlaStep::kv_down || step == MlaStep::kv_latent_copy || step == MlaStep::kv_up ||
         step == MlaStep::rope || step == MlaStep::expand;
}

template <class T>
T* at(const ParameterUnit& unit, T* base, OpRole role) {
  return unit.find(role, WeightPart::weight) ? base + unit.tensor(role).offset : nullptr;
}

}  // namespace

MlaBlock::MlaBlock(const MlaStage& stage, cudaStream_t stream)
    : stage_(stage),
      attention_(mla_shape(stage.layout.scenario().model, stage.layout.shapes().b, stage.layout.shapes().s),
                 stage.attention, stream) {}

MlaStepTensors MlaBlock::tensors_of(const OpPass& p, MlaStep step) {
  const MlaShape& s = attention_.shape();
  if (stage_.layout.layout(p.unit).shapes.tokens != s.tokens())
    throw std::logic_error("executor: an MLA layer of another micro-batch shape than its stage's");
  TensorStore& store = stage_.tensors;
  const auto get = [&](Act name) { return static_cast<bf16*>(store.get(p.mb, p.unit, name)); };
  const auto make = [&](Act name, std::size_t bytes) { return store.make(p.mb, p.unit, name, bytes, p.stream); };
  MlaStepTensors t;
  t.x = get(kInput);
  const bool backward = is_backward(step);
  t.saved = mla_saved_in(backward ? store.get(p.mb, p.unit, kSaved) : make(kSaved, mla_saved_bytes(s)), s);
  const std::size_t o_bytes = static_cast<std::size_t>(s.tokens() * s.o_width()) * sizeof(bf16);
  if (step == MlaStep::attention) t.saved.o = static_cast<bf16*>(make(kOutput, o_bytes));
  if (step == MlaStep::attention_backward) t.saved.o = get(kOutput), t.d_o = get(kOutputGrad);
  if (uses_forward_rows(step)) t.rows = mla_forward_rows_in(make(kRows, mla_forward_rows_bytes(s)), s);
  if (backward) t.grad_rows = mla_backward_rows_in(make(kGradRows, mla_backward_rows_bytes(s)), s);
  if (step == MlaStep::kv_down_input_grad)  // the first input gradient: written
    t.d_x = static_cast<bf16*>(make(kInputGrad, static_cast<std::size_t>(s.tokens() * s.hidden) * sizeof(bf16)));
  if (step == MlaStep::q_up_input_grad || step == MlaStep::q_down_input_grad) t.d_x = get(kInputGrad);
  const ParameterUnit& unit = stage_.parameters.unit(p.unit);
  for (auto [w, g, role] : {std::tuple{&t.w.q_down, &t.g.q_down, OpRole::mla_q_down},
                            std::tuple{&t.w.q_norm, &t.g.q_norm, OpRole::mla_q_norm},
                            std::tuple{&t.w.q_up, &t.g.q_up, OpRole::mla_q_up},
                            std::tuple{&t.w.kv_down, &t.g.kv_down, OpRole::mla_kv_down},
                            std::tuple{&t.w.kv_norm, &t.g.kv_norm, OpRole::mla_kv_norm},
                            std::tuple{&t.w.kv_up, &t.g.kv_up, OpRole::mla_kv_up}}) {
    *w = at<const bf16>(unit, unit.params, role);
    *g = at(unit, unit.bf16_grads(), role);
  }
  return t;
}

void MlaBlock::release_after(const OpPass& p, MlaStep step) {
  TensorStore& store = stage_.tensors;
  if (step == MlaStep::expand) store.release(p.mb, p.unit, kRows, p.stream);
  if (step == MlaStep::attention_backward)
    for (Act done : {kOutput, kOutputGrad}) store.release(p.mb, p.unit, done, p.stream);
  if (step == mla_steps(true, attention_.shape().q_lora_rank > 0).back())
    for (Act done : {kSaved, kGradRows}) store.release(p.mb, p.unit, done, p.stream);
}

void MlaBlock::run(const OpPass& p) {
  const MlaStep step = p.binding.mla_step;
  const MlaStepTensors t = tensors_of(p, step);
  attention_.run(step, t, {*p.scratch.matmul, p.scratch.norm_partials, p.stream, !p.binding.first_gradient, false});
  release_after(p, step);
}

}  // namespace twin::exec
