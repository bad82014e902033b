// Each kernel is launched in its own CUPTI region whose id says (point, what): the records of one point are told
// apart without relying on order. The host enqueues a point's periods ahead of the GPU (the launch queue blocks it
// when full), so the GPU never waits for it.
#include "calibrate/gpu/sustained_clock.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "calibrate/gpu/clock_probe.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "calibrate/gpu/rank_exchange.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/kernels.hpp"

namespace twin::gpu {
namespace {

constexpr std::int64_t kGemmSize = 8192;
constexpr std::int64_t kAddElements = 256ll << 20;  // bf16: 512 MiB per operand
constexpr int kGemmsPerPeriod = 4;
constexpr int kBurstGemms = 5;  // as many as calibration times a shape with

GemmShape load_gemm(GemmInputs inputs) {
  GemmShape shape{kGemmSize, kGemmSize, kGemmSize, 1, false, false};
  shape.inputs = inputs;
  return shape;
}

enum class Launch : std::uint64_t { gemm = 0, add = 1, probe_after_gemms = 2, probe_after_adds = 3 };

std::uint64_t region_of(std::size_t point, Launch what) { return 1 + 4 * point + static_cast<std::uint64_t>(what); }

struct Load {
  GemmShape shape;
  GemmBench gemm;
  DeviceBuffer a, b, c, x, y;
  Load(cudaStream_t stream, GemmInputs inputs)
      : shape(load_gemm(inputs)), gemm(stream), a(2 * gemm_a_elements(shape)), b(2 * gemm_b_elements(shape)),
        c(2 * gemm_c_elements(shape)), x(2 * kAddElements), y(2 * kAddElements) {
    fill_operand(shape, a.data(), gemm_a_elements(shape), 31, stream);
    fill_operand(shape, b.data(), gemm_b_elements(shape), 32, stream);
    fill_random_bf16(x.data(), kAddElements, 33, stream);
    fill_random_bf16(y.data(), kAddElements, 34, stream);
  }
  void launch(Launch what, CuptiKernelTimer& timer, std::uint64_t region) {
    timer.begin_region(region);
    switch (what) {
      case Launch::gemm: gemm.launch(shape, a.data(), b.data(), c.data()); break;
      case Launch::add:
        kernels::residual_add(static_cast<const kernels::bf16*>(x.data()), static_cast<const kernels::bf16*>(y.data()),
                              static_cast<kernels::bf16*>(x.data()), kAddElements, gemm.stream());
        break;
      case Launch::probe_after_gemms:
      case Launch::probe_after_adds: launch_clock_probe(gemm.stream()); break;
    }
    timer.end_region();
  }
};

double median_or_zero(std::vector<double> values) { return values.empty() ? 0 : percentile(std::move(values), 0.5); }

// A short burst of GEMMs between two probes, as calibration times a shape, and a few adds: what sizes the periods,
// and the GEMMs' throughput per MHz on a GPU that has not yet settled at its cap.
struct Burst {
  double gemm_ns = 0, add_ns = 0;  // median spans
  double gemm_tflops_per_MHz = 0;
};

// The reading of one point from its records, those starting in its first `settle_ns` left out.
SustainedClockReading reading_of(const std::vector<KernelRecord>& records, const GemmShape& shape, std::size_t point,
                                 double settle_ns, const Burst& burst) {
  std::uint64_t first_ns = ~0ull;
  for (const KernelRecord& r : records)
    if (!r.is_memcpy && r.region >= region_of(point, Launch::gemm) && r.region <= region_of(point, Launch::probe_after_adds))
      first_ns = std::min(first_ns, r.start_ns);
  double gemm_ns = 0, add_ns = 0;
  std::vector<double> gemm_spans, after_gemms, after_adds;
  for (const KernelRecord& r : records) {
    if (r.is_memcpy || r.start_ns < first_ns + settle_ns) continue;
    const double span_ns = static_cast<double>(r.end_ns - r.start_ns);
    if (r.region == region_of(point, Launch::gemm)) gemm_ns += span_ns, gemm_spans.push_back(span_ns);
    if (r.region == region_of(point, Launch::add)) add_ns += span_ns;
    if (r.region == region_of(point, Launch::probe_after_gemms)) after_gemms.push_back(clock_probe_MHz(span_ns));
    if (r.region == region_of(point, Launch::probe_after_adds)) after_adds.push_back(clock_probe_MHz(span_ns));
  }
  if (gemm_spans.empty() || after_gemms.empty())
    throw std::runtime_error("sustained clock: no GEMM or clock probe ran after the settling time");
  SustainedClockReading reading;
  reading.gemm_duty = gemm_ns / (gemm_ns + add_ns);
  reading.sm_clock_MHz = median_or_zero(after_gemms);
  reading.sm_clock_after_memory_MHz = median_or_zero(after_adds);
  reading.gemm_tflops = gemm_flops(shape) / median_or_zero(gemm_spans) * 1e-3;
  reading.gemm_clock_MHz = reading.gemm_tflops / burst.gemm_tflops_per_MHz;
  return reading;
}

// `region` (GEMMs), + 1 (adds), + 2 and + 3 (the probes before and after the GEMMs).
Burst burst_of(Load& load, CuptiKernelTimer& timer, std::uint64_t region) {
  load.launch(Launch::gemm, timer, region);  // cuBLASLt's first launch of a problem, not timed
  TWIN_CUDA_CHECK(cudaStreamSynchronize(load.gemm.stream()));
  timer.collect();
  load.launch(Launch::probe_after_adds, timer, region + 2);
  for (int i = 0; i < kBurstGemms; ++i) load.launch(Launch::gemm, timer, region);
  load.launch(Launch::probe_after_gemms, timer, region + 3);
  for (int i = 0; i < kBurstGemms; ++i) load.launch(Launch::add, timer, region + 1);
  TWIN_CUDA_CHECK(cudaStreamSynchronize(load.gemm.stream()));
  std::vector<double> gemm, add, probes;
  for (const KernelRecord& r : timer.collect()) {
    const double span_ns = static_cast<double>(r.end_ns - r.start_ns);
    if (r.is_memcpy) continue;
    if (r.region == region) gemm.push_back(span_ns);
    if (r.region == region + 1) add.push_back(span_ns);
    if (r.region == region + 2 || r.region == region + 3) probes.push_back(clock_probe_MHz(span_ns));
  }
  if (gemm.empty() || add.empty() || probes.size() != 2)
    throw std::runtime_error("sustained clock: CUPTI recorded no GEMM, add or clock probe of the burst");
  Burst burst;
  burst.gemm_ns = percentile(gemm, 0.5);
  burst.add_ns = percentile(add, 0.5);
  const double clock_MHz = (probes[0] + probes[1]) / 2;  // as calibration's shapes: the mean of the two probes
  burst.gemm_tflops_per_MHz = gemm_flops(load.shape) / burst.gemm_ns * 1e-3 / clock_MHz;
  return burst;
}

// Enqueues `seconds` of periods at `duty` (GEMMs, probe, adds, probe) under `point`'s regions.
void run_point(Load& load, CuptiKernelTimer& timer, std::size_t point, double duty, double seconds, double gemm_ns,
               double add_ns) {
  const int adds = static_cast<int>(std::lround(kGemmsPerPeriod * gemm_ns * (1 - duty) / (duty * add_ns)));
  const double period_ns = kGemmsPerPeriod * gemm_ns + adds * add_ns;
  const long periods = std::max(1l, std::lround(seconds * 1e9 / period_ns));
  for (long p = 0; p < periods; ++p) {
    for (int g = 0; g < kGemmsPerPeriod; ++g) load.launch(Launch::gemm, timer, region_of(point, Launch::gemm));
    load.launch(Launch::probe_after_gemms, timer, region_of(point, Launch::probe_after_gemms));
    if (adds == 0) continue;
    for (int i = 0; i < adds; ++i) load.launch(Launch::add, timer, region_of(point, Launch::add));
    load.launch(Launch::probe_after_adds, timer, region_of(point, Launch::probe_after_adds));
  }
}

}  // namespace

std::vector<SustainedClockReading> measure_sustained_clock(const SustainedClockLoad& load_plan) {
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<SustainedClockReading> readings;
  {
    Load load(stream, load_plan.gemm_inputs);
    CuptiKernelTimer timer;
    const std::size_t points = load_plan.gemm_duties.size();
    const Burst burst = burst_of(load, timer, region_of(points + 1, Launch::gemm));
    run_point(load, timer, points + 2, 1.0, load_plan.heat_s, burst.gemm_ns, burst.add_ns);  // heat, not read
    for (std::size_t point = 0; point < points; ++point) {
      const double duty = load_plan.gemm_duties[point];
      if (!(duty > 0 && duty <= 1)) throw std::invalid_argument("sustained clock: a GEMM duty outside (0, 1]");
      run_point(load, timer, point, duty, load_plan.point_s, burst.gemm_ns, burst.add_ns);
      TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
      readings.push_back(reading_of(timer.collect(), load.shape, point, load_plan.settle_s * 1e9, burst));
    }
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return readings;
}

SustainedClockCurve measure_sustained_clock_on_ranks(ncclComm_t world, int rank, int world_size,
                                                     const SustainedClockLoad& load,
                                                     const std::function<void(const std::string&)>& progress) {
  all_gather_values(world, world_size, rank);  // start together: the GPUs share the host's power and cooling
  const std::vector<SustainedClockReading> mine = measure_sustained_clock(load);
  const std::vector<SustainedClockReading> all =
      all_gather_values(world, world_size, mine.data(), mine.size());  // rank-major: rank r's readings, then r + 1's
  std::vector<std::vector<SustainedClockReading>> per_gpu;
  for (int r = 0; r < world_size; ++r) {
    per_gpu.emplace_back(all.begin() + r * mine.size(), all.begin() + (r + 1) * mine.size());
    for (const SustainedClockReading& reading : per_gpu.back()) {
      // At full duty no memory-bound kernel ran, so there is no probe after them to report.
      const std::string after_memory = reading.sm_clock_after_memory_MHz > 0
                                           ? fmt::format("{:.0f} MHz", reading.sm_clock_after_memory_MHz)
                                           : std::string("none (no memory-bound kernels at this duty)");
      progress(fmt::format("sustained clock ({} GEMMs), GPU {}: GEMM duty {:.3f}, {:.0f} MHz after the GEMMs, {} after "
                           "the memory-bound kernels, GEMM {:.0f} TFLOP/s, {:.0f} MHz by the GEMMs' cycles",
                           to_string(load.gemm_inputs), r, reading.gemm_duty, reading.sm_clock_MHz, after_memory,
                           reading.gemm_tflops, reading.gemm_clock_MHz));
    }
  }
  const SustainedClockCurve curve = sustained_clock_curve(per_gpu);
  for (const std::string& line : describe_sustained_clock(curve))
    progress(fmt::format("sustained clock ({} GEMMs): {}", to_string(load.gemm_inputs), line));
  return curve;
}

}  // namespace twin::gpu
