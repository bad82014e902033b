// Why half octaves in one layout: model widths (768, 1536, 5120, 11008, 14336) are not powers of two,
// and on an H200 such GEMMs ran up to 14% slower than predicted from power-of-two neighbours (the first
// `twin calibrate --check`, docs/PERFORMANCE.md): tile and wave quantisation and other kernel choices
// that an octave grid cannot show. Every lowered GEMM is emitted without
// transposes, so the denser grid is measured in that layout only; the four layouts keep the octave grid.
#include "calibrate/gemm_grid.hpp"

#include <set>
#include <tuple>

#include "cost/profile.hpp"

namespace twin {
namespace {

using ShapeTuple = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int32_t, bool, bool>;

std::vector<GemmShape> ordered(const std::set<ShapeTuple>& shapes) {
  std::vector<GemmShape> out;
  out.reserve(shapes.size());
  for (const auto& [m, n, k, count, ta, tb] : shapes) out.push_back(GemmShape{m, n, k, count, ta, tb});
  return out;
}

}  // namespace

// Five timed launches, not ten (since 2026-11-29, issue 43): within one round a shape's spans spread by 3.2% p10 to
// p90 (median over the 4,243 shapes of a full H200 calibration, 2026-11-28), so the median of five moves by about
// 0.7% (sd) against 0.5% for ten, while the rounds' clock swings (~3% sd, which the median round halves) dominate;
// two warm-up launches, since the operands rotate through sets that defeat the L2 anyway. A round costs 7
// launches instead of 13.
GemmRuns gemm_runs(bool quick) { return quick ? GemmRuns{2, 5, 1} : GemmRuns{2, 5, 3}; }

bool is_power_of_two(std::int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

std::vector<std::int64_t> half_octave_sizes() {
  std::vector<std::int64_t> sizes;
  for (std::int64_t p = 256; p <= 32768; p *= 2) {
    sizes.push_back(p);
    if (p < 32768) sizes.push_back(p + p / 2);
  }
  return sizes;
}

double estimated_gemm_kernel_ns(const GemmShape& shape, const GpuSpec& gpu) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = shape;
  // The grid's own estimate, fixed so that the grid does not move when the built-in profile does: 0.80 of the
  // bf16 peak at half of it by 1.5e9 FLOPs (about an H100's or H200's measured 8192^3), the memory floor at
  // 0.85 of HBM. What a micro-benchmark will time, without launch gaps.
  GpuKernelProfile curves;
  curves.gpu = gpu.name;
  curves.gemm = {0.80, 1.5e9};
  curves.memory_bound = {0.85, 4.0 * 1024 * 1024};
  return benchmark_kernel_time_ns(curves, gpu, op);
}

double estimated_gemm_calibration_seconds(const std::vector<GemmShape>& shapes, const GpuSpec& gpu, bool quick) {
  const GemmRuns runs = gemm_runs(quick);
  double ns = 0;
  for (const GemmShape& shape : shapes)
    ns += runs.rounds * (runs.warmup + runs.timed) * estimated_gemm_kernel_ns(shape, gpu);
  return ns * 1e-9;
}

GemmGrid default_gemm_grid(bool quick, const GpuSpec& gpu) {
  const std::vector<std::int64_t> octaves = quick ? std::vector<std::int64_t>{512, 2048, 8192}
                                                  : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096, 8192, 16384};
  std::set<ShapeTuple> shapes;
  for (bool transpose_a : {false, true})
    for (bool transpose_b : {false, true})
      for (std::int64_t m : octaves)
        for (std::int64_t n : octaves)
          for (std::int64_t k : octaves) shapes.insert({m, n, k, 1, transpose_a, transpose_b});
  GemmGrid grid;
  if (!quick) {
    const std::vector<std::int64_t> sizes = half_octave_sizes();
    for (std::int64_t m : sizes)
      for (std::int64_t n : sizes)
        for (std::int64_t k : sizes) {
          if (shapes.count({m, n, k, 1, false, false})) continue;  // an octave shape, measured above
          if (estimated_gemm_kernel_ns(GemmShape{m, n, k, 1, false, false}, gpu) > kGemmGridMaxKernelNs) {
            ++grid.left_out_slow;
            continue;
          }
          shapes.insert({m, n, k, 1, false, false});
        }
  }
  grid.shapes = ordered(shapes);
  return grid;
}

const std::vector<ModelGemm>& off_grid_model_gemms() {
  // (m, n, k) as strategies/lowering_layer.cpp emits them for T tokens: forward (T, out, in), input
  // gradient (T, in, out), weight gradient (in, out, T); widths per TP rank. Llama widths: QKV
  // (heads + 2 groups) * 128 / TP, fc1 2 * ffn / TP (SwiGLU), fc2 input ffn / TP.
  static const std::vector<ModelGemm> gemms = {
      {{4096, 22016, 4096, 1, false, false}, "llama2-7b fc1 forward, TP 1, 4096 tokens"},
      {{8192, 11008, 4096, 1, false, false}, "llama2-7b fc2 input gradient, TP 1, 8192 tokens"},
      {{4096, 4096, 1376, 1, false, false}, "llama2-7b fc2 forward, TP 8, 4096 tokens"},
      {{4096, 5504, 8192, 1, false, false}, "llama2-7b fc1 weight gradient, TP 4, 8192 tokens"},
      {{4096, 15360, 5120, 1, false, false}, "llama2-13b QKV forward, TP 1, 4096 tokens"},
      {{8192, 5120, 5120, 1, false, false}, "llama2-13b attention projection forward, TP 1, 8192 tokens"},
      {{4096, 5120, 6912, 1, false, false}, "llama2-13b fc2 forward, TP 2, 4096 tokens"},
      {{1728, 5120, 8192, 1, false, false}, "llama2-13b fc2 weight gradient, TP 8, 8192 tokens"},
      {{8192, 1280, 5120, 1, false, false}, "llama2-13b attention projection input gradient, TP 4, 8192 tokens"},
      {{4096, 10240, 8192, 1, false, false}, "llama2-70b QKV forward, TP 1, 4096 tokens"},
      {{4096, 14336, 8192, 1, false, false}, "llama2-70b fc2 input gradient, TP 2, 4096 tokens"},
      {{4096, 8192, 3584, 1, false, false}, "llama2-70b fc2 forward, TP 8, 4096 tokens"},
      {{8192, 28672, 4096, 1, false, false}, "llama2-70b fc1 weight gradient, TP 2, 4096 tokens"},
      {{8192, 14336, 4096, 1, false, false}, "llama3-8b fc1 forward, TP 2, 8192 tokens"},
      {{8192, 4096, 14336, 1, false, false}, "llama3-8b fc2 forward, TP 1, 8192 tokens"},
      // 4096 tokens x top-2 over 8 experts on 8 ranks, times the scenario's routing imbalance 1.2.
      {{9831, 28672, 4096, 1, false, false}, "mixtral-8x7b expert fc1 forward, EP 8, 4096 tokens"},
      {{9831, 4096, 14336, 1, false, false}, "mixtral-8x7b expert fc2 forward, EP 8, 4096 tokens"},
  };
  return gemms;
}

std::vector<GemmShape> fp8_gemm_grid() {
  std::vector<GemmShape> shapes;
  for (const std::int64_t m : {1024, 4096, 16384})
    for (const std::int64_t n : {1024, 4096, 16384})
      for (const std::int64_t k : {1024, 4096, 16384})
        for (const bool e5m2 : {false, true}) {
          GemmShape shape{m, n, k};
          shape.inputs = GemmInputs::fp8_per_tensor;
          shape.e5m2 = e5m2;
          shapes.push_back(shape);
        }
  return shapes;
}

}  // namespace twin
