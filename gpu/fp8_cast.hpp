// Per-tensor current scaling into FP8 (Transformer Engine's Float8CurrentScaling, Megatron's --fp8-recipe
// tensorwise): the tensor's amax, its scale fp8_max / amax, and its cast to E4M3 or E5M2 — the rowwise copy (as
// stored) and, where a GEMM reads it transposed, the columnwise copy (its transpose). Hopper's FP8 tensor-core GEMMs
// take only operands whose reduction dimension is contiguous ("TN"; cuBLASLt's cublasLtMatmul requirements), so a
// linear's weight gradient reads the transposes of its input and output gradient, and its forward the transpose of
// the weight stored [in, out] (gpu/fp8_matmul.hpp). One cast reads the bf16 tensor twice (the amax, then the cast)
// and writes each copy once: what strategies/fp8_linears.hpp's fp8_cast_bytes counts.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace twin::kernels {

enum class Fp8Type : std::uint8_t { e4m3, e5m2 };

// The largest finite value of the type (OCP FP8: E4M3 448, E5M2 57344). Host and device: the cast kernel computes
// its scale with it (as a host-only constexpr, nvcc warned and the kernel's scale came out 1 on an H200, 2026-11-29).
__host__ __device__ constexpr float fp8_max(Fp8Type type) { return type == Fp8Type::e4m3 ? 448.0f : 57344.0f; }

// The cast's scaling record, in device floats: [0] the inverse scale (amax / fp8_max: what a GEMM multiplies the FP8
// product by; first, so that a record 16-byte aligned hands cuBLASLt an aligned scale pointer), [1] the amax, and
// from [4] the amax pass's per-block maxima.
inline constexpr int kFp8AmaxBlocks = 512;
inline constexpr int kFp8PartialsAt = 4;
inline constexpr int kFp8ScalingFloats = kFp8PartialsAt + kFp8AmaxBlocks;

// The scale current scaling takes for `amax`: fp8_max / amax, or 1 for an all-zero or non-finite tensor, and the
// largest float where fp8_max / amax overflows (amax below about 1.3e-36 for E4M3, which a 1x128 block of near-zero
// values can have: an infinite scale would quantize the block's zeros to NaN), as Transformer Engine's
// compute_scale_from_amax does without a margin (transformer_engine/common/recipe/recipe_common.cuh). The host and
// the kernels share it.
__host__ __device__ inline float fp8_scale_for(float amax, Fp8Type type) {
  constexpr float kFloatMax = 3.402823466e38f;
  if (!(amax > 0.0f && amax <= kFloatMax)) return 1.0f;
  const float scale = fp8_max(type) / amax;
  return scale <= kFloatMax ? scale : kFloatMax;
}

// x (rows x cols, row-major bf16) into `rowwise` (rows x cols, 1 byte each) and, where not null, `columnwise`
// (its transpose, cols x rows); `scaling` gets the record above. rows and cols multiples of 4 when columnwise is
// asked. The amax is reduced in a fixed order: the same tensor gives the same bytes.
void fp8_cast_current_scaling(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                              std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, cudaStream_t stream);

// The same cast in its two kernels, for a tensor whose amax is all-reduced over GPUs between them (sequence
// parallelism: every TP rank's rows take the scale of the whole gathered tensor, Transformer Engine's amax reduction
// group): the amax pass writes its per-block maxima to scaling[kFp8PartialsAt ...], fp8_amax_partial_count(rows x
// cols) of them (a function of the count alone: equal shards give equal counts, so the maxima of every rank can be
// all-reduced (max) element by element); the cast then reduces those maxima as the one-call cast does. Called on
// one GPU in a row, the two give the one-call cast's bytes.
int fp8_amax_partial_count(std::int64_t count);
void fp8_amax_partials(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, float* scaling,
                       cudaStream_t stream);
void fp8_cast_from_amax_partials(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                                 std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, cudaStream_t stream);

// The transpose of a rows x cols matrix of bytes (an FP8 copy) into `transposed` (cols x rows): the columnwise copy
// of rows gathered over GPUs, which cannot be gathered as a transpose (Transformer Engine's _all_gather_fp8 then
// calls _create_transpose on Hopper). Any rows and cols.
void fp8_transpose(const std::uint8_t* rowwise, std::int64_t rows, std::int64_t cols, std::uint8_t* transposed,
                   cudaStream_t stream);

// Delayed scaling (Transformer Engine's DelayedScaling, Megatron's default --fp8-recipe delayed): a tensor's scale
// comes from the amaxes its earlier casts recorded, so one pass reads the bf16 tensor once, quantizing with that
// scale while taking the amax for the casts after it. Transformer Engine's amax_and_scale_update
// (transformer_engine/common/recipe/delayed_scaling.cu): the scale is fp8_max / max(amax history) with margin 0
// (amax_compute_algo "max"; with Megatron's default history of 1 the same as "most_recent"), and where that amax
// is 0 or not finite the scale before stays (1 at first: the first cast of a tensor runs with scale 1). Here the
// history is of the tensor's casts (one a micro-batch for activations and gradients, as TE's update at each
// forward and backward; one a step for the weights) and lives on the GPU: no host sync, no update kernel (the
// cast's last block runs the update).
//
// The tensor's state, in device floats, held across casts: [0] the scale of the next cast, [1] the running amax and
// [2] the ticket counter of the cast in flight, then the ring of the last history_len amaxes (cast i's in slot
// i mod history_len). The last block of each cast updates the ring and the scale (gpu/kernels/fp8_delayed_cast.cu).
inline constexpr int kFp8DelayedRingAt = 3;
inline constexpr int fp8_delayed_state_floats(int history_len) { return kFp8DelayedRingAt + history_len; }
// A state with scale 1 and no history.
void fp8_delayed_state_reset(float* state, int history_len, cudaStream_t stream);
// The cast numbered `cast_index` (0, 1, ... in stream order) of the tensor whose state is `state`: x into the
// copies as fp8_cast_current_scaling does, with the scale of the previous history_len casts; scaling[0] gets the
// inverse scale the GEMMs read (the rest of the record is untouched) and the ring this cast's amax.
// With `reduced_amax` (a float of a buffer that an all-reduce over the amax group takes: Transformer Engine's
// reduce_amax) the cast only folds its amax into *reduced_amax (an atomic max) and marks the state pending in its
// ticket float; fp8_delayed_update then moves the reduced amax into the ring and computes the next scale.
void fp8_cast_delayed_scaling(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                              std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, float* state,
                              int history_len, std::int64_t cast_index, cudaStream_t stream,
                              float* reduced_amax = nullptr);
// Transformer Engine's amax and scale update after the reduction (fused_amax_and_scale_update_after_reduction):
// for each of `count` states (`states`, a device array of state pointers) whose cast is pending, amaxes[i] (the
// all-reduced amax) into the ring slot of that cast and the next scale from the ring, as the fused path does; then
// amaxes[i] is 0 again for the next casts. States with no pending cast are left as they are.
void fp8_delayed_update(float* const* states, float* amaxes, int count, int history_len, Fp8Type type,
                        cudaStream_t stream);

// `count` E4M3 values uniform in [-1, 1] from `seed` (calibration's FP8 operands; valid E5M2 bytes too).
void fill_random_fp8(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream);

}  // namespace twin::kernels
