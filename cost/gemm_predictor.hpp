// Predicting the kernel time of a GEMM shape that calibration did not measure, from the shapes it did:
// the efficiency of the nearest measured shapes, interpolated in (log2 m, log2 n, log2 k, log2 count)
// and carried over to the query through the profile's efficiency model.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/profile.hpp"

namespace twin {

// The shape of a "gemm:m=..,n=..,k=..,count=..,ta=..,tb=.." key (kernel_shape_key); nullopt for other keys.
std::optional<GemmShape> gemm_shape_from_key(std::string_view key);

// The GEMM entries of a profile's `measured` map on the benchmark basis (benchmark_time_ns; a trace entry
// without a replaced benchmark is left out), in key order: those of 16-bit operands
// (GpuKernelProfile::measured_gemms), or with `fp8` those of FP8 operands (measured_fp8_gemms). Neither is a
// neighbour of the other: their kernels differ.
std::vector<MeasuredGemm> index_measured_gemms(const std::map<std::string, Measurement>& measured, bool fp8 = false);

// How many measured neighbours a prediction uses: the 8 corners of a grid cell around the query. On the
// default grid (calibrate/gemm_grid.hpp) they lie within about 0.6 octave of a query in the lowering's
// layout, whose sizes are measured every half octave.
inline constexpr int kGemmNeighbours = 8;
// A neighbour of another layout (transpose_a, transpose_b) counts as this many octaves further away:
// the same size in the other layout is preferred over the same layout one octave away, as measured
// layouts differ by a few percent where sizes an octave apart differ by more.
inline constexpr double kGemmLayoutDistance = 0.5;

// Indices into `measured` of the `count` shapes nearest to `shape` (the neighbours predict_gemm_time_ns
// weighs), nearest first, ties in the earlier index.
std::vector<std::size_t> nearest_measured_gemms(const std::vector<MeasuredGemm>& measured, const GemmShape& shape,
                                                std::size_t count);

// The tiles (rows x columns of C) of the cuBLASLt kernels CUPTI named in twin's H200 calibrations
// ("nvjet_sm90_tst_256x128_..."), each in both orientations since cuBLAS's column-major M is our N.
inline constexpr std::array<std::array<std::int64_t, 2>, 7> kGemmTiles = {
    {{128, 256}, {256, 128}, {192, 192}, {320, 128}, {128, 320}, {192, 128}, {128, 192}}};

// The work the best of kGemmTiles does for `shape` over its useful work (>= 1): the padding of its last
// row and column of tiles, times the idle SMs of its last wave once the tiles fill at least one wave of
// `sm_count` SMs (fewer tiles than SMs: cuBLASLt splits K across them instead). A GEMM between two
// measured sizes can fit its tiles worse than both (m=8192 n=1344 k=5120 ran 11% slower than the
// interpolation between n=1024 and n=1536 on an H200): the predictor carries this factor with the model.
double gemm_tile_work_factor(const GemmShape& shape, int sm_count);

// model_ns(shape) * exp(weighted mean of log(measured_ns / model_ns) over the kGemmNeighbours nearest
// measured shapes), weights 1 / distance^2: the efficiency relative to the model is interpolated, not the
// time, so that the model carries size effects (FLOPs, saturation) between and beyond measured shapes.
// An exactly measured shape returns its time. Throws std::invalid_argument when `measured` is empty.
double predict_gemm_time_ns(const std::vector<MeasuredGemm>& measured, const GemmShape& shape,
                            const std::function<double(const GemmShape&)>& model_ns);

}  // namespace twin
