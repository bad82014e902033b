// An FP8 tensor in the store is one buffer: the rowwise copy, the columnwise copy and the scale records, each padded
// to 256 bytes (cuBLASLt asks 16-byte aligned scale pointers). The GEMM shapes come from the op, checked against the
// weight as the bf16 linears check them; each operand's blocks come from the recipe (gpu::fp8_cast_blocks), the one
// rule the casts follow too.
#include "executor/gpu/fp8_linears.hpp"

#include <stdexcept>

#include "executor/gpu/kernel_launch.hpp"
#include "gpu/bias_epilogue.hpp"
#include "gpu/checks.hpp"

namespace twin::exec {
namespace {

constexpr std::int64_t kPad = 256;
std::int64_t padded(std::int64_t bytes) { return (bytes + kPad - 1) / kPad * kPad; }

// Bytes of the scale record of a copy of rows x cols (cols its contraction dimension), padded.
std::int64_t record_bytes(kernels::Fp8Scaling blocks, std::int64_t rows, std::int64_t cols) {
  const std::int64_t floats = blocks == kernels::Fp8Scaling::per_tensor
                                  ? kernels::kFp8ScalingFloats
                                  : kernels::fp8_block_scale_floats(blocks, rows, cols);
  return padded(floats * static_cast<std::int64_t>(sizeof(float)));
}

kernels::Fp8Scaling blocks_of(Fp8Recipe recipe, LinearTensor tensor) { return gpu::fp8_cast_blocks(recipe, tensor); }

}  // namespace

std::size_t Fp8Layout::bytes() const {
  const bool per_tensor = blocks == kernels::Fp8Scaling::per_tensor;
  const std::int64_t copies = held == Fp8Held::both ? 2 : 1;
  return static_cast<std::size_t>(copies * padded(rows * cols) + record_bytes(blocks, rows, cols) +
                                  (per_tensor ? 0 : record_bytes(blocks, cols, rows)));
}

std::size_t Fp8Layout::rowwise_apart_bytes() const { return static_cast<std::size_t>(padded(rows * cols)); }

Fp8Copies Fp8Layout::copies_in(void* buffer, void* rowwise_apart) const {
  auto* base = static_cast<std::uint8_t*>(buffer);
  const std::int64_t copy = padded(rows * cols);
  auto* rowwise_record = base + (held == Fp8Held::both ? 2 : 1) * copy;
  auto* columnwise_record =
      blocks == kernels::Fp8Scaling::per_tensor ? rowwise_record : rowwise_record + record_bytes(blocks, rows, cols);
  Fp8Copies copies{base, base + copy, reinterpret_cast<float*>(rowwise_record),
                   reinterpret_cast<float*>(columnwise_record)};
  if (held == Fp8Held::rowwise) copies.columnwise = nullptr;
  if (held == Fp8Held::columnwise) copies = {static_cast<std::uint8_t*>(rowwise_apart), base,
                                             copies.rowwise_scaling, copies.columnwise_scaling};
  return copies;
}

Fp8Layout fp8_layout(Fp8Recipe recipe, LinearTensor tensor, std::int64_t rows, std::int64_t cols, Fp8Held held) {
  return {rows, cols, blocks_of(recipe, tensor), held};
}

void Fp8LinearGemm::run(Fp8Matmul& matmul, bf16* c, cudaStream_t stream, const bf16* bias) const {
  Fp8MatmulProblem fused = problem;
  fused.bias = true;
  product_with_bias(
      bias, [&] { return matmul.supports(fused); },
      [&](const bf16* epilogue_bias) {
        Fp8MatmulProblem call = problem;
        call.bias = epilogue_bias != nullptr;
        matmul.run(call, a, a_scale_inv, b, b_scale_inv, c, stream, epilogue_bias);
      },
      c, problem.m, problem.n, stream);
}

Fp8LinearGemm fp8_forward_gemm(Fp8Recipe recipe, const GemmShape& g, const Fp8Copies& x, const Fp8Copies& w) {
  const Fp8MatmulProblem problem{g.m, g.n, g.k, false, false, false, blocks_of(recipe, LinearTensor::input),
                                 blocks_of(recipe, LinearTensor::weight)};
  return {problem, x.rowwise, x.rowwise_scaling, w.columnwise, w.columnwise_scaling};
}

Fp8LinearGemm fp8_data_grad_gemm(Fp8Recipe recipe, const GemmShape& g, const Fp8Copies& dy, const Fp8Copies& w) {
  const Fp8MatmulProblem problem{g.m, g.n, g.k, g.e5m2, false, false, blocks_of(recipe, LinearTensor::output_gradient),
                                 blocks_of(recipe, LinearTensor::weight)};
  return {problem, dy.rowwise, dy.rowwise_scaling, w.rowwise, w.rowwise_scaling};
}

Fp8LinearGemm fp8_weight_grad_gemm(Fp8Recipe recipe, const GemmShape& g, const Fp8Copies& x, const Fp8Copies& dy,
                                   bool accumulate) {
  const Fp8MatmulProblem problem{g.m, g.n, g.k, false, g.e5m2, accumulate, blocks_of(recipe, LinearTensor::input),
                                 blocks_of(recipe, LinearTensor::output_gradient)};
  return {problem, x.columnwise, x.columnwise_scaling, dy.columnwise, dy.columnwise_scaling};
}

Fp8Linears::Fp8Linears(const Fp8Config& fp8, TensorStore& tensors, DenseBlock& dense, const StageLayout& layout,
                       const RankClass& rc, const std::vector<OpBinding>& bindings, cudaStream_t stream,
                       ncclComm_t amax_group)
    : fp8_(fp8), tensors_(tensors), dense_(dense), layout_(layout), amax_group_(amax_group) {
  bool reduces = false;
  for (const OpBinding& b : bindings) reduces |= b.action == Action::fp8_amax_reduce;
  if (reduces && (fp8.recipe != Fp8Recipe::delayed || amax_group == nullptr))
    throw std::logic_error("executor: an FP8 amax reduction without delayed scaling or without its communicator");
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
    // Kept below for every cast and GEMM: ZeRO >= 2's whole buffers, which come and go, would not be the ones kept
    // (the plan check refuses FP8 with ZeRO over more than one GPU, executor/fp8_plan_check.cpp).
    if (!w.params || !w.grads)
      throw std::logic_error("executor: an FP8 linear of a unit that keeps only its ZeRO shard of weights or gradients");
    const Fp8Layout layout = fp8_layout(fp8_.recipe, LinearTensor::weight, w.in, w.out);
    weights_.emplace(key, std::pair{w, layout.copies_in(tensors_.static_buffer(layout.bytes()))});
    if (fp8_.recipe != Fp8Recipe::delayed) continue;
    for (LinearTensor tensor : {LinearTensor::input, LinearTensor::output_gradient, LinearTensor::weight}) {
      auto* state = static_cast<float*>(
          tensors_.static_buffer(kernels::fp8_delayed_state_floats(fp8_.amax_history_len) * sizeof(float)));
      kernels::fp8_delayed_state_reset(state, fp8_.amax_history_len, stream);
      delayed_.emplace(std::tuple{unit, bindings[i].subject, tensor}, DelayedScale{state});
    }
  }
  if (reduces) make_amax_reductions(stream);
  cast_weights(fp8_.recipe, stream);  // before the first step: the recipe every cast op of the plan says (checked)
}

// Each pass's states side by side in the order of delayed_ (the same on every GPU of the amax group: the same layers
// and linears), so that one all-reduce takes a pass's amaxes as Transformer Engine's global amax buffer does.
void Fp8Linears::make_amax_reductions(cudaStream_t stream) {
  std::vector<float*> states[2];
  for (auto& [key, delayed] : delayed_) states[std::get<2>(key) == LinearTensor::output_gradient ? 1 : 0].push_back(delayed.state);
  for (int pass = 0; pass < 2; ++pass) {
    AmaxReduction& r = reductions_[pass];
    r.count = static_cast<int>(states[pass].size());
    if (r.count == 0) continue;
    r.amaxes = static_cast<float*>(tensors_.static_buffer(r.count * sizeof(float)));
    r.states = static_cast<float**>(tensors_.static_buffer(r.count * sizeof(float*)));
    TWIN_CUDA_CHECK(cudaMemsetAsync(r.amaxes, 0, r.count * sizeof(float), stream));
    TWIN_CUDA_CHECK(cudaMemcpyAsync(r.states, states[pass].data(), r.count * sizeof(float*), cudaMemcpyHostToDevice,
                                    stream));
    TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host array goes out of scope
  }
  int next[2] = {0, 0};
  for (auto& [key, delayed] : delayed_) {
    const int pass = std::get<2>(key) == LinearTensor::output_gradient ? 1 : 0;
    delayed.reduced_amax = reductions_[pass].amaxes + next[pass]++;
  }
}

void Fp8Linears::reduce_amaxes(const OpPass& p) {
  const bool forward = p.op.phase == Phase::forward;
  const AmaxReduction& r = reductions_[forward ? 0 : 1];
  if (r.count == 0) return;
  TWIN_NCCL_CHECK(ncclAllReduce(r.amaxes, r.amaxes, r.count, ncclFloat32, ncclMax, amax_group_, p.stream));
  kernels::fp8_delayed_update(r.states, r.amaxes, r.count, fp8_.amax_history_len,
                              forward ? kernels::Fp8Type::e4m3 : gradient_type(), p.stream);
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
      call.reduced_amax = delayed->reduced_amax;
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
    gpu::Fp8Cast call{w.params, w.in, w.out, kernels::Fp8Type::e4m3, copies.rowwise, copies.columnwise,
                      copies.rowwise_scaling};
    call.columnwise_scaling = copies.columnwise_scaling;
    gpu::launch(scaled(call, recipe, key.first, key.second, LinearTensor::weight, stream), stream);
  }
}

Fp8Copies Fp8Linears::activation(const OpPass& p, LinearTensor tensor, std::int64_t rows, std::int64_t cols,
                                 bool make, Fp8Held held) {
  const Fp8Layout layout = fp8_layout(fp8_.recipe, tensor, rows, cols, held);
  const Act name = cast_name(p.binding.subject, tensor), apart{name.tensor, Form::fp8_rowwise};
  if (!make) {
    void* rowwise = tensors_.has(p.mb, p.unit, apart) ? tensors_.get(p.mb, p.unit, apart) : nullptr;
    return layout.copies_in(tensors_.get(p.mb, p.unit, name), rowwise);
  }
  void* rowwise = held == Fp8Held::columnwise
                      ? tensors_.make(p.mb, p.unit, apart, layout.rowwise_apart_bytes(), p.stream)
                      : nullptr;
  return layout.copies_in(tensors_.make(p.mb, p.unit, name, layout.bytes(), p.stream), rowwise);
}

Fp8Held held_as_cast(LinearTensor tensor, bool columnwise) {
  if (tensor != LinearTensor::input) return Fp8Held::both;
  return columnwise ? Fp8Held::columnwise : Fp8Held::rowwise;
}

void Fp8Linears::cast(const OpPass& p) {
  const Op& op = p.op;
  // The copies' buffers and scale records are laid out by the plan's recipe (fp8_layout): a cast of another recipe
  // would write records of another size into them.
  if (op.fp8_recipe != fp8_.recipe)
    throw std::logic_error("executor: an fp8_cast op of another recipe than the plan's training.fp8.recipe");
  if (op.linear_tensor == LinearTensor::weight) {  // after the optimizer step: the next step's weights
    if (op.kind != OpKind::fp8_cast) throw std::logic_error("executor: an FP8 weight cast that is no fp8_cast op");
    return cast_weights(op.fp8_recipe, p.stream);
  }
  const bool gradient = op.linear_tensor == LinearTensor::output_gradient;
  const Act source = source_name(p.binding.subject, op.linear_tensor);
  const Fp8Copies copies =
      activation(p, op.linear_tensor, op.rows, op.cols, true, held_as_cast(op.linear_tensor, op.fp8_columnwise));
  gpu::Fp8Cast call{static_cast<const bf16*>(tensors_.get(p.mb, p.unit, source)), op.rows, op.cols,
                    gradient ? gradient_type() : kernels::Fp8Type::e4m3, copies.rowwise,
                    op.fp8_columnwise ? copies.columnwise : nullptr, copies.rowwise_scaling};
  call.columnwise_scaling = copies.columnwise_scaling;
  call.amax_reduced = op.fp8_amax_reduced;  // the copies were made by the fp8_amax op before, its maxima in the record
  launch_op(op, p.binding, scaled(call, op.fp8_recipe, p.unit, p.binding.subject, op.linear_tensor, p.stream),
            p.stream);
  // A bf16 input kept for the weight gradient alone is the FP8 copy's from here on, as in Transformer Engine and
  // the memory model (core/layer.hpp input_kept_only_for_weight_gradient): freed after its cast on the cast's stream.
  if (!gradient && fp8_.wgrad && layer::input_kept_only_for_weight_gradient(layer::block_of(p.binding.subject)))
    tensors_.release(p.mb, p.unit, source, p.stream);
}

void Fp8Linears::forward(const OpPass& p) {
  const OpRole linear = p.binding.subject;
  const auto& [w, weight] = weights_.at({p.unit, linear});
  const GemmShape& g = p.op.gemm;  // Y[T,out] = X[T,in] W: m tokens, k in
  if (g.k != w.in || g.n != w.out) throw std::logic_error("FP8 linear forward: GEMM shape differs from the weight's");
  const Act apart{cast_name(linear, LinearTensor::input).tensor, Form::fp8_rowwise};
  // An ungathered input is held as its cast left it: the cast writes the columnwise copy where the weight gradient
  // reads FP8 (the lowering's Op::fp8_columnwise follows training.fp8.wgrad), so the plan says the layout.
  const Fp8Copies x = operand(p, LinearTensor::input, g.m, g.k, held_as_cast(LinearTensor::input, fp8_.wgrad));
  auto* out = static_cast<bf16*>(
      tensors_.make(p.mb, p.unit, linear_tensors(linear).output, g.m * g.n * sizeof(bf16), p.stream));
  // The bias in the GEMM's epilogue, as Transformer Engine's FP8 GEMM adds it (the kernel after it where it cannot).
  fp8_forward_gemm(fp8_.recipe, g, x, weight).run(*p.scratch.fp8_matmul, out, p.stream, dense_.forward_bias(p));
  // Under SP the backward gathers the copies as cast again (the graph says so): the gathered ones go now.
  tensors_.release(p.mb, p.unit, gathered_name(linear, LinearTensor::input), p.stream);
  tensors_.release(p.mb, p.unit, apart, p.stream);  // the weight gradient reads the columnwise copy
  if (!fp8_.wgrad) tensors_.release(p.mb, p.unit, cast_name(linear, LinearTensor::input), p.stream);
}

void Fp8Linears::input_grad(const OpPass& p) {
  const OpRole linear = p.binding.subject;
  const auto& [w, weight] = weights_.at({p.unit, linear});
  const GemmShape& g = p.op.gemm;  // dX[T,in] = dY[T,out] W^T: m tokens, k out
  if (g.n != w.in || g.k != w.out)
    throw std::logic_error("FP8 linear input gradient: GEMM shape differs from the weight's");
  const Fp8Copies dy = operand(p, LinearTensor::output_gradient, g.m, g.k, Fp8Held::both);
  auto* d_in = static_cast<bf16*>(
      tensors_.make(p.mb, p.unit, linear_tensors(linear).d_input_full, g.m * g.n * sizeof(bf16), p.stream));
  fp8_data_grad_gemm(fp8_.recipe, g, dy, weight).run(*p.scratch.fp8_matmul, d_in, p.stream);
  if (!fp8_.wgrad) release_operand(p, LinearTensor::output_gradient);
}

void Fp8Linears::weight_grad(const OpPass& p) {
  const OpRole linear = p.binding.subject;
  if (p.binding.gradient_apart)  // executor/plan_check.cpp refuses FP8 without gradient accumulation fusion
    throw std::logic_error("FP8 linear weight gradient: written apart for a gradient accumulation op");
  const LinearWeight& w = weights_.at({p.unit, linear}).first;
  const GemmShape& g = p.op.gemm;  // dW[in,out] = X^T dY: k tokens
  if (g.m != w.in || g.n != w.out)
    throw std::logic_error("FP8 linear weight gradient: GEMM shape differs from the weight's");
  const Fp8Copies x = operand(p, LinearTensor::input, g.k, g.m, Fp8Held::columnwise);
  const Fp8Copies dy = operand(p, LinearTensor::output_gradient, g.k, g.n, Fp8Held::both);
  fp8_weight_grad_gemm(fp8_.recipe, g, x, dy, !p.binding.first_gradient)
      .run(*p.scratch.fp8_matmul, bf16_gradient(w.grads), p.stream);
  // The bias's gradient from the bf16 output gradient the cast read (its column sums), as the bf16 linear takes it.
  const Act d_output = source_name(linear, LinearTensor::output_gradient);
  if (tensors_.has(p.mb, p.unit, d_output))
    dense_.linear_bias_grad(p, static_cast<const bf16*>(tensors_.get(p.mb, p.unit, d_output)), g.k, g.n);
  release_operand(p, LinearTensor::input);
  release_operand(p, LinearTensor::output_gradient);
}

Fp8Copies Fp8Linears::operand(const OpPass& p, LinearTensor tensor, std::int64_t rows, std::int64_t cols,
                              Fp8Held held) {
  const Act gathered = gathered_name(p.binding.subject, tensor);
  if (!tensors_.has(p.mb, p.unit, gathered)) return activation(p, tensor, rows, cols, false, held);
  return fp8_layout(fp8_.recipe, tensor, rows, cols).copies_in(tensors_.get(p.mb, p.unit, gathered));
}

LinearTensors Fp8Linears::tensors_of(OpRole linear) const {
  return linear_tensors(linear, dense_.branch_has_own_gradient());
}

Act Fp8Linears::cast_name(OpRole linear, LinearTensor tensor) const {
  const LinearTensors t = tensors_of(linear);
  if (tensor == LinearTensor::input) return {t.input.tensor, Form::fp8};
  if (tensor == LinearTensor::output_gradient) return {t.d_output.tensor, Form::fp8_gradient};
  throw std::logic_error("executor: an FP8 activation that is neither a linear's input nor its output gradient");
}

Act Fp8Linears::source_name(OpRole linear, LinearTensor tensor) const {
  const LinearTensors t = tensors_of(linear);
  return tensor == LinearTensor::output_gradient ? t.d_output : t.input;
}

Act Fp8Linears::gathered_name(OpRole linear, LinearTensor tensor) const {
  const Act cast = cast_name(linear, tensor);
  return {cast.tensor, tensor == LinearTensor::input ? Form::fp8_gathered : Form::fp8_gradient_gathered};
}

void Fp8Linears::release_operand(const OpPass& p, LinearTensor tensor) {
  tensors_.release(p.mb, p.unit, gathered_name(p.binding.subject, tensor), p.stream);
  tensors_.release(p.mb, p.unit, cast_name(p.binding.subject, tensor), p.stream);
}

}  // namespace twin::exec
