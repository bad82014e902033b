// FP8 under sequence parallelism with one scale per tensor (current or delayed scaling), as Transformer Engine's
// _Linear and _all_gather_fp8 run it on Hopper (NVIDIA/TransformerEngine d0067d0da6, pytorch/distributed.py): a
// tensor SP gathers is cast on this GPU's rows into its rowwise copy only, the rowwise bytes are all-gathered over
// TP (rank-major rows, as the bf16 gather lays them out), the scale record is this GPU's (every rank has the same
// scale: current scaling all-reduces the amax over TP before the cast, delayed scaling reduces its amax history over
// a group that holds TP), and where wgrad reads the columnwise copy an fp8_transpose op after the gather transposes
// the gathered rows into it (_create_transpose, which TE's _Linear runs before wgrad on the compute stream).
#include <stdexcept>
#include <string>

#include "executor/gpu/fp8_linears.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "gpu/checks.hpp"

namespace twin::exec {

void Fp8Linears::reduce_gathered_amax(const OpPass& p) {
  const Op& op = p.op;
  if (fp8_.recipe != Fp8Recipe::tensorwise)
    throw std::logic_error("executor: an amax all-reduce over TP under " + to_string(fp8_.recipe) + " scaling");
  const Act source = source_name(p.binding.subject, op.linear_tensor);
  // The copies the cast after this op fills (made here: the record holds the maxima until then).
  const Fp8Copies copies =  // a gathered input's cast writes its rowwise copy alone
      activation(p, op.linear_tensor, op.rows, op.cols, true, held_as_cast(op.linear_tensor, false));
  kernels::fp8_amax_partials(static_cast<const bf16*>(tensors_.get(p.mb, p.unit, source)), op.rows, op.cols,
                             copies.rowwise_scaling, p.stream);
  float* maxima = copies.rowwise_scaling + kernels::kFp8PartialsAt;
  TWIN_NCCL_CHECK(ncclAllReduce(maxima, maxima, kernels::fp8_amax_partial_count(op.rows * op.cols), ncclFloat32,
                                ncclMax, layout_.layout(p.unit).tensor, p.stream));
}

void Fp8Linears::gather(const OpPass& p) {
  const Op& op = p.op;
  if (op.kind != OpKind::all_gather || !op.fp8_payload)
    throw std::logic_error("executor: an FP8 gather that is not an all-gather of FP8 copies");
  if (fp8_.recipe != Fp8Recipe::tensorwise && fp8_.recipe != Fp8Recipe::delayed)
    throw std::logic_error("executor: an FP8 gather under " + to_string(fp8_.recipe) + " scaling (one scale per "
                           "tensor only)");
  const OpRole linear = p.binding.subject;
  const LinearTensor tensor = op.linear_tensor;
  const UnitLayout& layout = layout_.layout(p.unit);
  const LinearWeight& w = weights_.at({p.unit, linear}).first;
  const std::int64_t rows = layout.shapes.tokens_local, cols = tensor == LinearTensor::input ? w.in : w.out;
  if (op.bytes != rows * layout.shapes.tp * cols)
    throw std::logic_error("executor: an FP8 gather of " + std::to_string(op.bytes) + " bytes where the linear's " +
                           to_string(tensor) + " holds " + std::to_string(rows * cols) + " per GPU");
  const Fp8Copies local = activation(p, tensor, rows, cols, false, held_as_cast(tensor, false));
  const Fp8Layout gathered_layout = fp8_layout(fp8_.recipe, tensor, rows * layout.shapes.tp, cols);
  const Fp8Copies gathered = gathered_layout.copies_in(
      tensors_.make(p.mb, p.unit, gathered_name(linear, tensor), gathered_layout.bytes(), p.stream));
  TWIN_NCCL_CHECK(ncclAllGather(local.rowwise, gathered.rowwise, rows * cols, ncclUint8, layout.tensor, p.stream));
  TWIN_CUDA_CHECK(cudaMemcpyAsync(gathered.rowwise_scaling, local.rowwise_scaling, kernels::kFp8ScalingFloats *
                                  sizeof(float), cudaMemcpyDeviceToDevice, p.stream));
  // In backward this is the copies' last reader; forward, the backward gathers them again where wgrad runs in FP8.
  if (op.phase == Phase::backward) tensors_.release(p.mb, p.unit, cast_name(linear, tensor), p.stream);
}

void Fp8Linears::transpose(const OpPass& p) {
  const Op& op = p.op;
  const OpRole linear = p.binding.subject;
  const LinearTensor tensor = op.linear_tensor;
  const UnitLayout& layout = layout_.layout(p.unit);
  const LinearWeight& w = weights_.at({p.unit, linear}).first;
  const std::int64_t rows = layout.shapes.tokens_local * layout.shapes.tp;
  const std::int64_t cols = tensor == LinearTensor::input ? w.in : w.out;
  if (op.rows != rows || op.cols != cols)
    throw std::logic_error("executor: an FP8 transpose of " + std::to_string(op.rows) + " x " + std::to_string(op.cols) +
                           " where the linear's gathered " + to_string(tensor) + " is " + std::to_string(rows) + " x " +
                           std::to_string(cols));
  const Fp8Copies gathered = fp8_layout(fp8_.recipe, tensor, rows, cols)
                                 .copies_in(tensors_.get(p.mb, p.unit, gathered_name(linear, tensor)));
  launch_op(op, p.binding, gpu::Fp8Transpose{gathered.rowwise, rows, cols, gathered.columnwise}, p.stream);
}

}  // namespace twin::exec
