// The interpreter's handler of FP8 linears (scenario training.fp8, recipes tensorwise and delayed;
// executor/fp8_plan_check.hpp says what else it refuses): the fp8_cast ops and the GEMMs of a linear whose GemmShape::inputs is FP8, as
// Transformer Engine's Linear runs them on Hopper. A cast writes a tensor's rowwise FP8 copy and, where the weight
// gradient reads it, its columnwise copy (the transpose: Hopper's FP8 GEMMs read both operands with the reduction
// dimension contiguous, gpu/fp8_matmul.hpp), with one scale from the tensor's own amax (gpu/fp8_cast.hpp). With
// weights stored [in, out] the three GEMMs read:
//   forward     Y[T,out]  = X[T,in] W        : X rowwise,              W columnwise ([out, in])
//   data grad   dX[T,in]  = dY[T,out] W^T    : dY rowwise (E5M2 in the hybrid format), W rowwise
//   weight grad dW[in,out] = X^T dY          : X columnwise ([in, T]), dY columnwise ([out, T])
// so every FP8 tensor needs both copies when the weight gradient runs in FP8 (training.fp8.wgrad), as the
// lowering's casts say (Op::fp8_columnwise). The FP8 copies of activations live in the tensor store beside their
// bf16 tensor (Form::fp8, Form::fp8_gradient) until their last GEMM; the weights' copies live as long as the
// runtime, made once before the first step and again by the cast after every optimizer step. Under delayed scaling
// each linear holds three scaling states (its input, output gradient and weight: gpu/fp8_cast.hpp) for as long as
// the runtime, each cast taking its scale from the casts of that tensor before it, in the order they run on their
// stream (one stream per state, checked).
#pragma once
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "core/fp8.hpp"
#include "executor/gpu/dense_block.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "gpu/fp8_cast.hpp"
#include "gpu/op_kernels.hpp"

namespace twin::exec {

// One FP8 tensor: its copies and its scaling record (kernels::kFp8ScalingFloats; [0] the inverse scale).
struct Fp8Copies {
  std::uint8_t* rowwise = nullptr;
  std::uint8_t* columnwise = nullptr;
  float* scaling = nullptr;
  const float* scale_inv() const { return scaling; }
};

// A tensor's delayed-scaling state (gpu/fp8_cast.hpp) and the casts it has seen.
struct DelayedScale {
  float* state = nullptr;
  std::int64_t casts = 0;
  cudaStream_t stream = nullptr;  // the stream of its first cast: later ones must follow it there
};

// The cast an fp8_cast op of `recipe` (Op::fp8_recipe; for the weights cast before the first step, the plan's) makes
// of `tensor`: `call` (its tensor and copies) with the recipe: tensorwise as it is; delayed with `delayed`, the
// tensor's state of `history_len`, advanced by one cast on `stream`; blockwise with the tensor's blocks
// (gpu::fp8_cast_blocks; the plan check refuses blockwise plans before any cast: the linears keep per-tensor
// records). Throws std::logic_error for mxfp8, or a delayed state cast on two streams (its history would race).
gpu::Fp8Cast fp8_cast_call(Fp8Recipe recipe, LinearTensor tensor, gpu::Fp8Cast call, DelayedScale* delayed,
                           int history_len, cudaStream_t stream);

class Fp8Linears {
 public:
  // The FP8 copies of the weights the class's FP8 GEMMs read, allocated from `tensors`' static buffers and cast on
  // `stream`.
  Fp8Linears(const Fp8Config& fp8, TensorStore& tensors, DenseBlock& dense, const RankClass& rank_class,
             const std::vector<OpBinding>& bindings, cudaStream_t stream);

  void cast(const OpPass& p);  // an fp8_cast op
  void forward(const OpPass& p);
  void input_grad(const OpPass& p);
  void weight_grad(const OpPass& p);

 private:
  // The copies of a tensor of `elements` in the unit's slot under `name` (made when `make`).
  Fp8Copies activation(const OpPass& p, Act name, std::int64_t elements, bool make);
  void cast_weights(Fp8Recipe recipe, cudaStream_t stream);
  kernels::Fp8Type gradient_type() const;
  // fp8_cast_call of `recipe` with the state of (unit, linear, tensor) under delayed scaling.
  gpu::Fp8Cast scaled(gpu::Fp8Cast call, Fp8Recipe recipe, int unit, OpRole linear, LinearTensor tensor,
                      cudaStream_t stream);

  Fp8Config fp8_;
  TensorStore& tensors_;
  DenseBlock& dense_;
  std::map<std::pair<int, OpRole>, std::pair<LinearWeight, Fp8Copies>> weights_;  // by (unit, linear)
  std::map<std::tuple<int, OpRole, LinearTensor>, DelayedScale> delayed_;           // delayed scaling only
};

}  // namespace twin::exec
