// The interpreter's handler of FP8 linears (scenario training.fp8, recipes tensorwise, delayed and blockwise;
// executor/fp8_plan_check.hpp says what else it refuses): the fp8_cast ops and the GEMMs of a linear whose
// GemmShape::inputs is FP8, as Transformer Engine's Linear runs them on Hopper. A cast writes a tensor's rowwise FP8
// copy and, where the weight gradient reads it, its columnwise copy (Hopper's FP8 GEMMs read both operands with the
// reduction dimension contiguous, gpu/fp8_matmul.hpp), with the scale record of the recipe: one scale from the
// tensor's own amax (tensorwise), from its history (delayed; gpu/fp8_cast.hpp), or one per block (blockwise;
// gpu/fp8_block_cast.hpp: a record per copy). With weights stored [in, out] the three GEMMs read:
//   forward     Y[T,out]  = X[T,in] W        : X rowwise,              W columnwise ([out, in])
//   data grad   dX[T,in]  = dY[T,out] W^T    : dY rowwise (E5M2 in the hybrid format), W rowwise
//   weight grad dW[in,out] = X^T dY          : X columnwise ([in, T]), dY columnwise ([out, T])
// so every FP8 tensor needs both copies when the weight gradient runs in FP8 (training.fp8.wgrad), as the
// lowering's casts say (Op::fp8_columnwise). Under blockwise (DeepSeek-V3's recipe) each copy's blocks follow the
// contraction of the GEMM that reads it (gpu::fp8_cast_blocks says which): the forward is X 1x128 (along in) by W
// 128x128 and the data gradient dY 1x128 (along out) by W 128x128 (W's transpose keeps its 128x128 blocks), both
// cuBLASLt's VEC128 x BLK128x128; the weight gradient X^T 1x128 by dY^T 1x128, both along the tokens (VEC128 x
// VEC128), since the columnwise copies are quantized along their own rows. cuBLASLt on Hopper runs these pairs and
// not 128x128 by 128x128 (tests/gpu/fp8_blockwise_test.cpp; within 2.6e-3 of float64 on an H200, docs/ACCURACY.md).
// Blockwise runs E4M3 for gradients too (the plan check asks format e4m3): DeepSeek-V3 quantizes every tensor to
// E4M3 (arXiv:2412.19437 section 3.3), and TE's Float8BlockScaling defaults to E4M3 in both passes.
// The FP8 copies of activations live in the tensor store beside their bf16 tensor (Form::fp8, Form::fp8_gradient)
// until their last GEMM, with their scale records in the same buffer; an input whose weight gradient reads its
// columnwise copy keeps that one alone after the forward GEMM, and its bf16 tensor goes after the cast where
// nothing else reads it (Fp8Held; core/layer.hpp input_kept_only_for_weight_gradient), as Transformer Engine keeps
// them and the memory model counts them; the weights' copies and records live as long
// as the runtime, made once before the first step and again by the cast after every optimizer step. Under delayed
// scaling each linear holds three scaling states (its input, output gradient and weight: gpu/fp8_cast.hpp) for as
// long as the runtime, each cast taking its scale from the casts of that tensor before it, in the order they run on
// their stream (one stream per state, checked).
// Under sequence parallelism with per-tensor scales (executor/gpu/fp8_gathers.cpp) a tensor SP gathers is cast on
// this GPU's rows into its rowwise copy, gathered over TP (Op::fp8_payload) into its gathered form
// (Form::fp8_gathered, Form::fp8_gradient_gathered) and, where wgrad reads it, transposed there into the columnwise
// copy by an fp8_transpose op, as Transformer Engine's _Linear does on Hopper before wgrad; under current scaling its amax is all-reduced over
// TP first (Action::fp8_gathered_amax), so every shard takes the scale of the whole. A GEMM reads a tensor's
// gathered form where the store holds it.
#pragma once
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "core/fp8.hpp"
#include "executor/gpu/dense_block.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "gpu/fp8_cast.hpp"
#include "gpu/fp8_matmul.hpp"
#include "gpu/op_kernels.hpp"

namespace twin::exec {

// One FP8 tensor: its copies and each copy's scale record. Per tensor, one record for both
// (kernels::kFp8ScalingFloats; [0] the inverse scale); blockwise, a record per copy in TE's GEMM-ready layout
// (kernels::fp8_block_scale_floats).
struct Fp8Copies {
  std::uint8_t* rowwise = nullptr;
  std::uint8_t* columnwise = nullptr;
  float* rowwise_scaling = nullptr;
  float* columnwise_scaling = nullptr;
};

// The copies an FP8 tensor's buffer holds: both; the rowwise one alone (a cast without a columnwise copy: an input
// that SP gathers, or whose weight gradient is not FP8); or the columnwise one, the weight gradient's, whose rowwise
// copy, read by the forward GEMM alone, has a buffer of its own (Form::fp8_rowwise) that goes after that GEMM, as
// Transformer Engine keeps an ungathered input's columnwise copy alone for backward.
enum class Fp8Held : std::uint8_t { both, rowwise, columnwise };

// Where an FP8 tensor of rows x cols (as the bf16 tensor is stored) lies in its buffer: the copies it holds (each
// padded to 256 bytes), then the scale records of the blocks `blocks` (both copies' records, whatever it holds).
struct Fp8Layout {
  std::int64_t rows = 0, cols = 0;
  kernels::Fp8Scaling blocks = kernels::Fp8Scaling::per_tensor;
  Fp8Held held = Fp8Held::both;
  std::size_t bytes() const;
  std::size_t rowwise_apart_bytes() const;  // the buffer of the rowwise copy apart (Fp8Held::columnwise)
  // The copies in `buffer`; under Fp8Held::columnwise the rowwise copy is `rowwise_apart` (null once it went).
  Fp8Copies copies_in(void* buffer, void* rowwise_apart = nullptr) const;
};
// The layout of `tensor`'s FP8 copies under `recipe` (its blocks: gpu::fp8_cast_blocks) holding `held`.
Fp8Layout fp8_layout(Fp8Recipe recipe, LinearTensor tensor, std::int64_t rows, std::int64_t cols,
                     Fp8Held held = Fp8Held::both);
// What the buffer of `tensor`'s copies holds as its cast leaves it (`columnwise`: the cast writes that copy,
// Op::fp8_columnwise): an input keeps the columnwise copy with the rowwise one apart, or the rowwise one alone; an
// output gradient both (its GEMMs follow one another in backward).
Fp8Held held_as_cast(LinearTensor tensor, bool columnwise);

// One FP8 GEMM of a linear: the problem (m, n, k, E5M2 from the op's GemmShape; each operand's blocks from the
// recipe) and the copies it reads, as the table above says.
struct Fp8LinearGemm {
  Fp8MatmulProblem problem;
  const std::uint8_t* a = nullptr;
  const float* a_scale_inv = nullptr;
  const std::uint8_t* b = nullptr;
  const float* b_scale_inv = nullptr;
  // `bias` (nullptr: none) in the GEMM's epilogue where cuBLASLt can and the vector is aligned, else added after it.
  void run(Fp8Matmul& matmul, bf16* c, cudaStream_t stream, const bf16* bias = nullptr) const;
};
Fp8LinearGemm fp8_forward_gemm(Fp8Recipe recipe, const GemmShape& g, const Fp8Copies& x, const Fp8Copies& w);
Fp8LinearGemm fp8_data_grad_gemm(Fp8Recipe recipe, const GemmShape& g, const Fp8Copies& dy, const Fp8Copies& w);
Fp8LinearGemm fp8_weight_grad_gemm(Fp8Recipe recipe, const GemmShape& g, const Fp8Copies& x, const Fp8Copies& dy,
                                   bool accumulate);

// A tensor's delayed-scaling state (gpu/fp8_cast.hpp) and the casts it has seen; where the plan reduces amaxes over
// GPUs (Action::fp8_amax_reduce), its float in its pass's reduction buffer.
struct DelayedScale {
  float* state = nullptr;
  std::int64_t casts = 0;
  cudaStream_t stream = nullptr;  // the stream of its first cast: later ones must follow it there
  float* reduced_amax = nullptr;
};

// The delayed-scaling states one amax reduction updates (Transformer Engine's forward or backward amax buffer): their
// amaxes side by side, one all-reduce's buffer, and a device array of their states for the update kernel.
struct AmaxReduction {
  float* amaxes = nullptr;
  float** states = nullptr;
  int count = 0;
};

// The cast an fp8_cast op of `recipe` (Op::fp8_recipe; for the weights cast before the first step, the plan's) makes
// of `tensor`: `call` (its tensor and copies) with the recipe: tensorwise as it is; delayed with `delayed`, the
// tensor's state of `history_len`, advanced by one cast on `stream`; blockwise with the tensor's blocks
// (gpu::fp8_cast_blocks; `call` then holds both copies' records). Throws std::logic_error for mxfp8, or a delayed
// state cast on two streams (its history would race).
gpu::Fp8Cast fp8_cast_call(Fp8Recipe recipe, LinearTensor tensor, gpu::Fp8Cast call, DelayedScale* delayed,
                           int history_len, cudaStream_t stream);

class Fp8Linears {
 public:
  // The FP8 copies of the weights the class's FP8 GEMMs read, allocated from `tensors`' static buffers and cast on
  // `stream`.
  // `amax_group`: the communicator of the plan's amax reductions (Communicators::amax), null where it has none.
  // `layout`: each unit's TP communicator, for the gathers under SP.
  Fp8Linears(const Fp8Config& fp8, TensorStore& tensors, DenseBlock& dense, const StageLayout& layout,
             const RankClass& rank_class, const std::vector<OpBinding>& bindings, cudaStream_t stream,
             ncclComm_t amax_group);

  void cast(const OpPass& p);  // an fp8_cast op
  // An fp8_amax op: the forward's (inputs and weights) or the backward's (output gradients) amaxes all-reduced
  // (max) over the amax group, then every pending state's ring and scale updated (kernels::fp8_delayed_update).
  void reduce_amaxes(const OpPass& p);
  void forward(const OpPass& p);
  void input_grad(const OpPass& p);
  void weight_grad(const OpPass& p);
  // Sequence parallelism (executor/gpu/fp8_gathers.cpp): an fp8_amax op over TP (current scaling: the amax of this
  // GPU's rows of the tensor, all-reduced into the record its cast then scales by), an all_gather of FP8, and the
  // fp8_transpose of the gathered rows into their columnwise copy.
  void reduce_gathered_amax(const OpPass& p);
  void gather(const OpPass& p);
  void transpose(const OpPass& p);

 private:
  // The copies of `tensor` (rows x cols, as stored in bf16) in the unit's slot, holding `held` (made when `make`;
  // under Fp8Held::columnwise with the rowwise copy apart, while the store holds it).
  Fp8Copies activation(const OpPass& p, LinearTensor tensor, std::int64_t rows, std::int64_t cols, bool make,
                       Fp8Held held);
  // What a GEMM reads of `tensor` (rows x cols as the GEMM sees it): its gathered form where the store holds one,
  // else its copies as cast (holding `held`); and, after the GEMM that reads it last, their release.
  Fp8Copies operand(const OpPass& p, LinearTensor tensor, std::int64_t rows, std::int64_t cols, Fp8Held held);
  void release_operand(const OpPass& p, LinearTensor tensor);
  // A linear's tensors as the bf16 linear names them (linear_tensors with DenseBlock::branch_has_own_gradient: under
  // post norms or hidden dropout a row-parallel linear's output gradient is its branch's, through the norm's backward
  // or the dropout mask). From them, the store's names of its FP8 input or output gradient: as cast, the bf16 tensor
  // the cast (and, under SP, the amax before it) reads, and as gathered over TP.
  LinearTensors tensors_of(OpRole linear) const;
  Act cast_name(OpRole linear, LinearTensor tensor) const;
  Act source_name(OpRole linear, LinearTensor tensor) const;
  Act gathered_name(OpRole linear, LinearTensor tensor) const;
  void cast_weights(Fp8Recipe recipe, cudaStream_t stream);
  kernels::Fp8Type gradient_type() const;
  // fp8_cast_call of `recipe` with the state of (unit, linear, tensor) under delayed scaling.
  gpu::Fp8Cast scaled(gpu::Fp8Cast call, Fp8Recipe recipe, int unit, OpRole linear, LinearTensor tensor,
                      cudaStream_t stream);

  Fp8Config fp8_;
  TensorStore& tensors_;
  DenseBlock& dense_;
  const StageLayout& layout_;
  std::map<std::pair<int, OpRole>, std::pair<LinearWeight, Fp8Copies>> weights_;  // by (unit, linear)
  std::map<std::tuple<int, OpRole, LinearTensor>, DelayedScale> delayed_;           // delayed scaling only
  // Delayed scaling with amax reductions: [0] the forward's (inputs, weights), [1] the backward's.
  void make_amax_reductions(cudaStream_t stream);
  ncclComm_t amax_group_ = nullptr;
  AmaxReduction reductions_[2];
};

}  // namespace twin::exec
