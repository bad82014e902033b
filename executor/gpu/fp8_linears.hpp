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
  void cast_weights(cudaStream_t stream);
  kernels::Fp8Type gradient_type() const;
  // `call` with the scale its recipe takes: as it is for current scaling; under delayed scaling with the state of
  // (unit, linear, tensor) and the number of its cast.
  gpu::Fp8Cast scaled(gpu::Fp8Cast call, int unit, OpRole linear, LinearTensor tensor, cudaStream_t stream);

  struct DelayedScale {
    float* state = nullptr;
    std::int64_t casts = 0;
    cudaStream_t stream = nullptr;  // the stream of its first cast: later ones must follow it there
  };

  Fp8Config fp8_;
  TensorStore& tensors_;
  DenseBlock& dense_;
  std::map<std::pair<int, OpRole>, std::pair<LinearWeight, Fp8Copies>> weights_;  // by (unit, linear)
  std::map<std::tuple<int, OpRole, LinearTensor>, DelayedScale> delayed_;           // delayed scaling only
};

}  // namespace twin::exec
