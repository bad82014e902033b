// Each kernel is launched in its own CUPTI region whose id says (point, what): the records of one point are told
// apart without relying on order. The host enqueues a point's periods ahead of the GPU (the launch queue blocks it
// when full), so the GPU never waits for it.
#include "calibrate/gpu/sustained_clock.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "calibrate/gpu/clock_probe.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "calibrate/gpu/rank_exchange.hpp"
#include "calibrate/power_model_fit.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/kernels.hpp"
#include "gpu/nvml_power.hpp"

namespace twin::gpu {
namespace {

constexpr std::int64_t kGemmSize = 8192;
constexpr std::int64_t kAddElements = 256ll << 20;  // bf16: 512 MiB per operand
constexpr int kGemmsPerPeriod = 4;
constexpr int kBurstGemms = 5;  // as many as calibration times a shape with
constexpr double kAddBytes = 3.0 * 2 * kAddElements;  // reads x and y, writes x: bf16
constexpr int kAddsPerMemoryPeriod = 8;  // the memory-only load: adds and a probe, no GEMM

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
  std::uint64_t counted_first_ns = ~0ull, counted_last_ns = 0;
  std::vector<double> gemm_spans, after_gemms, after_adds;
  int adds = 0;
  for (const KernelRecord& r : records) {
    if (r.is_memcpy || r.start_ns < first_ns + settle_ns) continue;
    if (r.region < region_of(point, Launch::gemm) || r.region > region_of(point, Launch::probe_after_adds)) continue;
    counted_first_ns = std::min(counted_first_ns, r.start_ns);
    counted_last_ns = std::max(counted_last_ns, r.end_ns);
    const double span_ns = static_cast<double>(r.end_ns - r.start_ns);
    if (r.region == region_of(point, Launch::add)) ++adds;
    if (r.region == region_of(point, Launch::gemm)) gemm_ns += span_ns, gemm_spans.push_back(span_ns);
    if (r.region == region_of(point, Launch::add)) add_ns += span_ns;
    if (r.region == region_of(point, Launch::probe_after_gemms)) after_gemms.push_back(clock_probe_MHz(span_ns));
    if (r.region == region_of(point, Launch::probe_after_adds)) after_adds.push_back(clock_probe_MHz(span_ns));
  }
  if (after_gemms.empty() && after_adds.empty())
    throw std::runtime_error("sustained clock: no clock probe ran after the settling time");
  SustainedClockReading reading;
  reading.gemm_duty = gemm_ns + add_ns > 0 ? gemm_ns / (gemm_ns + add_ns) : 0;
  // Without GEMMs (the power model's memory-only and one-thread loads) the clock is the probes' after the adds.
  reading.sm_clock_MHz = median_or_zero(after_gemms.empty() ? after_adds : after_gemms);
  reading.sm_clock_after_memory_MHz = median_or_zero(after_adds);
  if (!gemm_spans.empty()) {
    reading.gemm_tflops = gemm_flops(shape) / median_or_zero(gemm_spans) * 1e-3;
    reading.gemm_clock_MHz = reading.gemm_tflops / burst.gemm_tflops_per_MHz;
  }
  const double counted_s = static_cast<double>(counted_last_ns - counted_first_ns) * 1e-9;
  reading.flops_per_s = gemm_flops(shape) * static_cast<double>(gemm_spans.size()) / counted_s;
  reading.bytes_per_s = kAddBytes * adds / counted_s;
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

// The energy counter where the GPU's stream reaches a point of a load: a host function enqueued there reads it, so
// the mean power between two marks is that of the kernels between them (the host runs ahead of the GPU).
struct EnergyMark {
  const NvmlPower* nvml = nullptr;
  double energy_J = 0, at_s = 0;
  bool failed = false;  // NVML's call failed inside the host function (no exception may leave it)
};

void CUDART_CB read_energy_mark(void* data) {
  auto* mark = static_cast<EnergyMark*>(data);
  try {
    mark->energy_J = mark->nvml->energy_J();
    mark->at_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  } catch (...) {
    mark->failed = true;
  }
}

// The two marks of a point's counted part (its first `settle_s` left out, as reading_of leaves its records out).
struct EnergyWindow {
  EnergyMark start, end;
  double settle_s = 0;
  double power_W() const {
    if (start.failed || end.failed || !(end.at_s > start.at_s))
      throw std::runtime_error("sustained clock: NVML's energy counter could not be read around a load");
    return (end.energy_J - start.energy_J) / (end.at_s - start.at_s);
  }
};

// What one period of a load runs: GEMMs then a probe, adds then a probe; neither: one probe (the one-thread load).
struct PeriodMix {
  int gemms = kGemmsPerPeriod, adds = 0;
};

PeriodMix mix_at(double duty, double gemm_ns, double add_ns) {
  return {kGemmsPerPeriod, static_cast<int>(std::lround(kGemmsPerPeriod * gemm_ns * (1 - duty) / (duty * add_ns)))};
}

// Enqueues `seconds` of periods of `mix` under `point`'s regions; with `window`, its marks at the end of the settling
// part and at the end.
void run_point(Load& load, CuptiKernelTimer& timer, std::size_t point, PeriodMix mix, double seconds, double gemm_ns,
               double add_ns, EnergyWindow* window = nullptr) {
  const double probe_ns = kClockProbeCycles / 2.0;  // ~100 us at the clocks a Hopper GPU runs
  const double work_ns = mix.gemms * gemm_ns + mix.adds * add_ns;
  const double period_ns = work_ns > 0 ? work_ns : probe_ns;
  const long periods = std::max(1l, std::lround(seconds * 1e9 / period_ns));
  const long settled = window ? std::min(periods - 1, std::lround(std::ceil(window->settle_s * 1e9 / period_ns))) : -1;
  for (long p = 0; p < periods; ++p) {
    if (p == settled) TWIN_CUDA_CHECK(cudaLaunchHostFunc(load.gemm.stream(), read_energy_mark, &window->start));
    for (int g = 0; g < mix.gemms; ++g) load.launch(Launch::gemm, timer, region_of(point, Launch::gemm));
    if (mix.gemms > 0) load.launch(Launch::probe_after_gemms, timer, region_of(point, Launch::probe_after_gemms));
    for (int i = 0; i < mix.adds; ++i) load.launch(Launch::add, timer, region_of(point, Launch::add));
    if (mix.adds > 0 || mix.gemms == 0)
      load.launch(Launch::probe_after_adds, timer, region_of(point, Launch::probe_after_adds));
  }
  if (window) TWIN_CUDA_CHECK(cudaLaunchHostFunc(load.gemm.stream(), read_energy_mark, &window->end));
}


// NVML on this GPU, or none (a machine without the driver's library: the curve is measured, the power left out).
std::unique_ptr<NvmlPower> open_nvml() {
  int device = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  try {
    return std::make_unique<NvmlPower>(device);
  } catch (const std::runtime_error&) {
    return nullptr;
  }
}

// One point of `mix` under `point`'s regions, read with its power where NVML is there.
SustainedClockReading measure_point(Load& load, CuptiKernelTimer& timer, const NvmlPower* nvml, std::size_t point,
                                    PeriodMix mix, double seconds, double settle_s, const Burst& burst) {
  EnergyWindow window;
  window.settle_s = settle_s;
  window.start.nvml = window.end.nvml = nvml;
  run_point(load, timer, point, mix, seconds, burst.gemm_ns, burst.add_ns, nvml ? &window : nullptr);
  TWIN_CUDA_CHECK(cudaStreamSynchronize(load.gemm.stream()));
  SustainedClockReading reading = reading_of(timer.collect(), load.shape, point, settle_s * 1e9, burst);
  if (nvml) {
    reading.power_W = window.power_W();
    reading.power_cap_W = nvml->power_limit_W();
  }
  return reading;
}

}  // namespace

std::vector<SustainedClockReading> measure_sustained_clock(const SustainedClockLoad& load_plan) {
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<SustainedClockReading> readings;
  {
    Load load(stream, load_plan.gemm_inputs);
    CuptiKernelTimer timer;
    const std::unique_ptr<NvmlPower> nvml = open_nvml();
    const std::size_t points = load_plan.gemm_duties.size();
    const Burst burst = burst_of(load, timer, region_of(points + 1, Launch::gemm));
    run_point(load, timer, points + 2, {}, load_plan.heat_s, burst.gemm_ns, burst.add_ns);  // heat, not read
    for (std::size_t point = 0; point < points; ++point) {
      const double duty = load_plan.gemm_duties[point];
      if (!(duty > 0 && duty <= 1)) throw std::invalid_argument("sustained clock: a GEMM duty outside (0, 1]");
      readings.push_back(measure_point(load, timer, nvml.get(), point, mix_at(duty, burst.gemm_ns, burst.add_ns),
                                       load_plan.point_s, load_plan.settle_s, burst));
    }
    // After the curve, the GPU as hot as in its points: the memory-only load, then the one-thread one. Neither
    // reaches the cap, so the limiter has nothing to settle: a short settling part (the clock's ramp) is enough.
    const double s = load_plan.power_load_s, settle_s = load_plan.power_load_settle_s;
    if (s > 0) {
      readings.push_back(measure_point(load, timer, nvml.get(), points + 3, {0, kAddsPerMemoryPeriod}, s, settle_s, burst));
      readings.push_back(measure_point(load, timer, nvml.get(), points + 4, {0, 0}, s, settle_s, burst));
    }
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return readings;
}

namespace {

// The power model of the median readings, or none where they cannot carry one (the reason logged).
PowerModel power_model_of(const std::vector<std::vector<SustainedClockReading>>& per_gpu, std::size_t duties,
                          const std::function<void(const std::string&)>& progress) {
  if (per_gpu.front().size() != duties + 2) return {};
  std::vector<SustainedClockReading> curve;
  for (std::size_t p = 0; p < duties; ++p) curve.push_back(median_reading(per_gpu, p));
  try {
    const PowerModelFit fit = fit_power_model(curve, median_reading(per_gpu, duties), median_reading(per_gpu, duties + 1));
    for (const std::string& line : describe_power_fit(fit)) progress("power model: " + line);
    return fit.model;
  } catch (const std::invalid_argument& why) {
    progress(fmt::format("power model: not fitted ({})", why.what()));
    return {};
  }
}

std::string describe_reading(const SustainedClockReading& reading) {
  // At full duty no memory-bound kernel ran, so there is no probe after them to report.
  const std::string after_memory = reading.sm_clock_after_memory_MHz > 0
                                       ? fmt::format("{:.0f} MHz", reading.sm_clock_after_memory_MHz)
                                       : std::string("none (no memory-bound kernels at this duty)");
  return fmt::format("GEMM duty {:.3f}, {:.0f} MHz after the GEMMs, {} after the memory-bound kernels, GEMM {:.0f} "
                     "TFLOP/s, {:.0f} MHz by the GEMMs' cycles; {:.1f} W (cap {:.0f} W), {:.1f} TFLOP/s and {:.0f} GB/s "
                     "of busy time",
                     reading.gemm_duty, reading.sm_clock_MHz, after_memory, reading.gemm_tflops, reading.gemm_clock_MHz,
                     reading.power_W, reading.power_cap_W, reading.flops_per_s * 1e-12, reading.bytes_per_s * 1e-9);
}

}  // namespace

SustainedClockMeasurement measure_sustained_clock_on_ranks(ncclComm_t world, int rank, int world_size,
                                                           const SustainedClockLoad& load,
                                                           const std::function<void(const std::string&)>& progress) {
  all_gather_values(world, world_size, rank);  // start together: the GPUs share the host's power and cooling
  const std::vector<SustainedClockReading> mine = measure_sustained_clock(load);
  const std::vector<SustainedClockReading> all =
      all_gather_values(world, world_size, mine.data(), mine.size());  // rank-major: rank r's readings, then r + 1's
  const std::size_t duties = load.gemm_duties.size();
  std::vector<std::vector<SustainedClockReading>> per_gpu, curve_per_gpu;
  for (int r = 0; r < world_size; ++r) {
    per_gpu.emplace_back(all.begin() + r * mine.size(), all.begin() + (r + 1) * mine.size());
    curve_per_gpu.emplace_back(per_gpu.back().begin(), per_gpu.back().begin() + duties);
    for (std::size_t p = 0; p < mine.size(); ++p) {
      const char* what = p < duties ? "" : p == duties ? " memory-only load:" : " one-thread load:";
      progress(fmt::format("sustained clock ({} GEMMs), GPU {}:{} {}", to_string(load.gemm_inputs), r, what,
                           describe_reading(per_gpu.back()[p])));
    }
  }
  SustainedClockMeasurement measured;
  measured.curve = sustained_clock_curve(curve_per_gpu);
  for (const std::string& line : describe_sustained_clock(measured.curve))
    progress(fmt::format("sustained clock ({} GEMMs): {}", to_string(load.gemm_inputs), line));
  measured.power = power_model_of(per_gpu, duties, progress);
  return measured;
}

}  // namespace twin::gpu
