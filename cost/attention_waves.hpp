// A tile-and-wave model of flash attention, the carrier that interpolation among a profile's measured attention
// shapes scales (as gemm_tile_work_factor is the GEMMs'): a flash kernel runs (batch x head) pairs of row tiles, each
// a fixed cost plus one step per block of keys it sees (causality: a query tile sees the keys up to its diagonal, a
// key tile is seen by the query tiles from its diagonal on), handed out in launch order to the SMs as they free up.
// The kernel time of a shape then follows the last SM to finish, not its FLOPs: 8 heads of one sequence fill the
// GPU less evenly than 16, and a head dim of 64 with 96 (batch x head) pairs has more tiles than the grid's shapes.
// Chosen on a calibration's attention grid by leaving one shape out, held out on the twelve shapes `twin calibrate
// --check` times apart (docs/ACCURACY.md, "Attention off the grid"; tests/cost/attention_waves_study_test.cpp).
#pragma once
#include <functional>
#include <vector>

#include "core/op.hpp"
#include "cost/profile.hpp"

namespace twin {

// The tiling the model assumes for the calibrated kernels (cuDNN's fused flash attention; its tile shapes are not
// published, so they are chosen, not read): 64 rows per tile, two tiles per SM at a time, and a tile's fixed cost
// (loading its rows, filling and draining the pipeline, the softmax's last rescale and the writes) worth 8 blocks of
// keys. Selected together among 64 or 128 rows, 1 or 2 tiles per SM, launch order or heaviest or lightest tile first,
// and a fixed cost of 0 to 12 blocks, by the mean error over a calibration's attention grid with each shape left
// out in turn (3.20%; 128 rows, one per SM and 4 blocks: 3.23%); nothing is fitted per shape.
struct AttentionTiling {
  int tile_rows = 64;
  int tiles_per_sm = 2;
  double tile_fixed_blocks = 8;
};
inline constexpr AttentionTiling kAttentionTiling{};

// The head dim a flash attention kernel runs: FlashAttention-2 rounds it up to a multiple of 32 up to 192 and to 256
// above (Dao-AILab/flash-attention, csrc/flash_attn/flash_api.cpp `head_size_rounded`; its kernels are instantiated
// for head dims 32, 64, ..., 256), and on an H200 cuDNN's ran head dim 80 (GPT-3 2.7B's) at about head dim 96's time
// per (batch x head) pair, 1.3-1.8x the price of a kernel as wide as 80 (docs/ACCURACY.md "A GPT-style model,
// blind"). The head dims calibration measures (64, 96, 128, 192, 256) run as they are.
inline constexpr std::int64_t kHeadDimStep = 32;
std::int64_t kernel_head_dim(std::int64_t head_dim);

// The time the slowest SM takes, in steps of one block of keys times kernel_head_dim(head_dim) (a unit whose cost interpolation
// learns from the measured shapes): forward, each (batch x head) pair's query tiles; backward, its key tiles; in
// launch order (tile index fastest, then head, then batch), each to the first free of sm_count x tiles_per_sm
// slots; packed rows (AttentionShape::packed) as seq_q / seq_kv sequences of seq_kv. sm_count > 0.
double attention_wave_steps(const AttentionShape& a, bool backward, int sm_count,
                            const AttentionTiling& tiling = kAttentionTiling);

// A flash attention op's time from the measured shapes of its kind and variant: attention_wave_steps scaled by the
// interpolated ratio of measured time to steps of the nearest (predict_kernel_time_ns, in the shape space of
// cost/shape_space.hpp); an exactly measured shape returns its time. Without a comparable measured shape of its own
// variant: a capped or sinks op as the kernel without them, a windowed op as the kernel without the window scaled by
// its steps over that kernel's; else (or without an SM count) `curve_ns`, the profile's efficiency curve.
double predict_attention_time_ns(const std::vector<MeasuredKernelShape>& measured, const Op& op, int sm_count,
                                 const std::function<double(const Op&)>& curve_ns,
                                 const AttentionTiling& tiling = kAttentionTiling);

}  // namespace twin
