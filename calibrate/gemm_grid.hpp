// The GEMM shapes `twin calibrate` measures by default, what they cost in GPU time, and the real model
// GEMMs off that grid that `twin calibrate --check` measures to test the predictor (gemm_predictor.hpp).
// Pure C++ so that the grid and the check's shapes are tested on machines without a GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/op.hpp"

namespace twin {

// Launches per GEMM shape and round: untimed warm-up, then timed repetitions (the median is kept); the
// shapes are timed in `rounds` passes, each in its own order, and a shape keeps its median round
// (cost/sm_clock.hpp): one timing is a draw from the swings of a power-limited GPU's clock, and
// scaling to one clock leaves about 3% of noise (sd) that the median of three rounds halves.
struct GemmRuns {
  int warmup = 0;
  int timed = 0;
  int rounds = 1;
};
GemmRuns gemm_runs(bool quick);

// Half-octave sizes 256, 384, 512, 768, ..., 24576, 32768: the powers of two and 1.5 times each (tokens per
// micro-batch and the widest layers, 28672 in Llama-2 70B, reach past 16384).
std::vector<std::int64_t> half_octave_sizes();
bool is_power_of_two(std::int64_t x);

// A half-octave shape the grid leaves out when its kernel is estimated to take longer than this: large
// GEMMs vary slowly with size, and the power-of-two shapes around them are still measured.
inline constexpr double kGemmGridMaxKernelNs = 5e6;

struct GemmGrid {
  std::vector<GemmShape> shapes;   // distinct, ordered by (m, n, k, count, transpose_a, transpose_b)
  int left_out_slow = 0;           // half-octave shapes over kGemmGridMaxKernelNs
};

// Full: every (m, n, k) of the powers of two 256..16384 in the four layouts (transpose_a, transpose_b),
// plus every (m, n, k) of half_octave_sizes() in the layout the lowering emits (no transposes; see
// strategies/lowering_layer.cpp) whose estimated kernel time is at most kGemmGridMaxKernelNs.
// Quick: (m, n, k) of 512, 2048 and 8192 in the four layouts (108 shapes).
// Kernel times are estimated with the built-in profile of `gpu` (estimated_gemm_kernel_ns).
GemmGrid default_gemm_grid(bool quick, const GpuSpec& gpu);

// FP8 GEMMs a full calibration times beside a GPU's bf16 grid (GPUs with FP8 tensor cores): every (m, n, k) of
// 1024, 4096 and 16384, E4M3 x E4M3 and E4M3 x E5M2, per-tensor scaling (27 x 2 shapes). A modest grid: the
// scenario's own FP8 shapes come on top, and interpolation prices an FP8 shape among FP8 shapes only.
std::vector<GemmShape> fp8_gemm_grid();

// The built-in profile's kernel time of one GEMM on `gpu`, launch overhead excluded.
double estimated_gemm_kernel_ns(const GemmShape& shape, const GpuSpec& gpu);
// GPU kernel time of timing `shapes` as calibration does (rounds x (warm-up + timed) launches each), from
// estimated_gemm_kernel_ns; allocation, data fill and CUPTI processing come on top.
double estimated_gemm_calibration_seconds(const std::vector<GemmShape>& shapes, const GpuSpec& gpu, bool quick);

// A GEMM the lowering emits for a real model, named by where it comes from.
struct ModelGemm {
  GemmShape shape;
  std::string origin;  // "llama2-7b fc1 forward, TP 1, 4096 tokens"
};
// The GEMMs `twin calibrate --check` measures against the predictor: GEMMs of Llama-2 7B/13B/70B,
// Llama-3 8B and Mixtral 8x7B layers at 4096 or 8192 tokens per micro-batch under TP 1 to 8, none of them
// in default_gemm_grid(false, ...), in the lowering's layout.
const std::vector<ModelGemm>& off_grid_model_gemms();

}  // namespace twin
