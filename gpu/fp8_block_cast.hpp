// Block-wise scaling into FP8 (Transformer Engine's Float8BlockScaling, Megatron's --fp8-recipe blockwise; DeepSeek-V3's
// recipe, arXiv:2412.19437 section 3.3): E4M3 with an FP32 scale per block, fp8_max / amax of the block (1 where the
// block is all zero, fp8_scale_for), so that an outlier costs the precision of its block only. Activations and
// gradients take a scale per 128 elements along the contraction dimension of the GEMM that reads the copy ("1x128"),
// weights one per 128 x 128 block. cuBLASLt applies the scales per block inside the GEMM, accumulating in FP32
// (gpu/fp8_matmul.hpp: CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F and BLK128x128_32F).
//
// Hopper's FP8 GEMMs read both operands with the contraction dimension contiguous (gpu/fp8_cast.hpp), so the
// columnwise copy is the transpose, and a 1x128 tensor's columnwise copy has its own blocks along its own rows (the
// weight gradient contracts over the tokens): another quantisation, not the rowwise bytes moved. A 128 x 128 tensor's
// transpose keeps its blocks and scales. As Transformer Engine does, both copies are cast from the bf16 tensor.
//
// The scale records hold the inverse scales (amax / fp8_max: what the GEMM multiplies by) in Transformer Engine's
// GEMM-ready layouts, which its GEMM hands cuBLASLt as they are (transformer_engine/pytorch/tensor/
// float8_blockwise_tensor.py get_scale_shape; common/gemm/cublaslt_gemm.cu), for a copy of R rows x C columns with
// C the contraction dimension:
//   1x128     [ceil(C / 128)][round_up(R, 4)]              (a column block's scales of every row: rows contiguous)
//   128x128   [ceil(R / 128)][round_up(ceil(C / 128), 4)]
// Transformer Engine rounds its scales to powers of two by default (QParams power_2_scale); DeepSeek-V3's recipe and
// this cast do not.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/fp8_cast.hpp"

namespace twin::kernels {

// How one FP8 operand of a GEMM is scaled: one scale (per tensor), or per block.
enum class Fp8Scaling : std::uint8_t { per_tensor, blocks_1x128, blocks_128x128 };

inline constexpr std::int64_t kFp8BlockLength = 128;

// Floats of the scale record of a copy of rows x cols (cols the contraction dimension) under block scaling `scaling`
// (1 for per_tensor), as laid out above.
std::int64_t fp8_block_scale_floats(Fp8Scaling scaling, std::int64_t rows, std::int64_t cols);

// x (rows x cols, row-major bf16) into `rowwise` (rows x cols, E4M3 or E5M2) with its scale record
// `rowwise_scale_inv` and, where `columnwise` is not null, the transpose (cols x rows) with `columnwise_scale_inv`:
// 1x128 blocks along each copy's rows, or 128 x 128 blocks. rows and cols multiples of 4. Throws
// std::invalid_argument for per_tensor scaling or such shapes. Deterministic: no atomics.
void fp8_cast_blockwise(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                        Fp8Scaling scaling, std::uint8_t* rowwise, float* rowwise_scale_inv, std::uint8_t* columnwise,
                        float* columnwise_scale_inv, cudaStream_t stream);

}  // namespace twin::kernels
