// Each kernel is launched in its own CUPTI region whose id says (point, what): the records of one point are told
// apart without relying on order. The host enqueues a point's periods ahead of the GPU (the launch queue blocks it
// when full), so the GPU never waits for it.
#include "calibrate/gpu/sustained_clock.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "calibrate/gpu/clock_probe.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "calibrate/gpu/power_load_units.hpp"
#include "calibrate/gpu/rank_exchange.hpp"
#include "calibrate/gpu/stream_marks.hpp"
#include "calibrate/power_model_fit.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/kernels.hpp"
#include "gpu/nvml_power.hpp"

namespace twin::gpu {
namespace {

constexpr std::int64_t kAddElements = 256ll << 20;  // bf16: 512 MiB per operand
constexpr int kGemmsPerPeriod = 4;
constexpr int kBurstGemms = 5;  // as many as calibration times a shape with
constexpr double kAddBytes = 3.0 * 2 * kAddElements;  // reads x and y, writes x: bf16
constexpr int kAddsPerMemoryPeriod = 8;  // the memory-only load: adds and a probe, no GEMM
constexpr std::size_t kNvmlClockSamples = 32;  // per point's counted part (calibrate/gpu/stream_marks.hpp: a few us each)

// gemm: one unit of the load's compute (ComputeUnit: a GEMM, a grouped GEMM, attention); idle: the one-thread probe
// as filler between units (the power model's GEMM loads under the cap), its span also a clock reading.
enum class Launch : std::uint64_t { gemm = 0, add = 1, probe_after_gemms = 2, probe_after_adds = 3, idle = 4 };
constexpr std::uint64_t kRegionsPerPoint = 5;

std::uint64_t region_of(std::size_t point, Launch what) {
  return 1 + kRegionsPerPoint * point + static_cast<std::uint64_t>(what);
}

struct Load {
  cudaStream_t stream;
  std::unique_ptr<ComputeUnit> unit;
  DeviceBuffer x, y;
  Load(cudaStream_t s, std::unique_ptr<ComputeUnit> u)
      : stream(s), unit(std::move(u)), x(2 * kAddElements), y(2 * kAddElements) {
    fill_random_bf16(x.data(), kAddElements, 33, stream);
    fill_random_bf16(y.data(), kAddElements, 34, stream);
  }
  void launch(Launch what, CuptiKernelTimer& timer, std::uint64_t region) {
    timer.begin_region(region);
    switch (what) {
      case Launch::gemm: unit->launch(); break;
      case Launch::add:
        kernels::residual_add(static_cast<const kernels::bf16*>(x.data()), static_cast<const kernels::bf16*>(y.data()),
                              static_cast<kernels::bf16*>(x.data()), kAddElements, stream);
        break;
      case Launch::probe_after_gemms:
      case Launch::probe_after_adds:
      case Launch::idle: launch_clock_probe(stream); break;
    }
    timer.end_region();
  }
};

double median_or_zero(std::vector<double> values) { return values.empty() ? 0 : percentile(std::move(values), 0.5); }

// A short burst of GEMMs between two probes, as calibration times a shape, and a few adds: what sizes the periods,
// and the GEMMs' throughput per MHz on a GPU that has not yet settled at its cap.
struct Burst {
  double gemm_ns = 0, add_ns = 0;  // median spans of a unit (all its kernels) and of an add
  double probe_ns = 0;             // the one-thread probe's span at the burst's clock
  double kernels_per_unit = 1;     // a grouped GEMM's groups, attention's forward and backward kernels
  double gemm_tflops_per_MHz = 0;
};

// The reading of one point from its records, those starting in its first `settle_ns` left out.
SustainedClockReading reading_of(const std::vector<KernelRecord>& records, const ComputeUnit& unit, std::size_t point,
                                 double settle_ns, const Burst& burst) {
  std::uint64_t first_ns = ~0ull;
  for (const KernelRecord& r : records)
    if (!r.is_memcpy && r.region >= region_of(point, Launch::gemm) && r.region <= region_of(point, Launch::idle))
      first_ns = std::min(first_ns, r.start_ns);
  double gemm_ns = 0, add_ns = 0, idle_ns = 0;
  std::uint64_t counted_first_ns = ~0ull, counted_last_ns = 0;
  std::vector<double> gemm_spans, after_gemms, after_adds;
  int adds = 0;
  for (const KernelRecord& r : records) {
    if (r.is_memcpy || r.start_ns < first_ns + settle_ns) continue;
    if (r.region < region_of(point, Launch::gemm) || r.region > region_of(point, Launch::idle)) continue;
    counted_first_ns = std::min(counted_first_ns, r.start_ns);
    counted_last_ns = std::max(counted_last_ns, r.end_ns);
    const double span_ns = static_cast<double>(r.end_ns - r.start_ns);
    if (r.region == region_of(point, Launch::add)) ++adds;
    if (r.region == region_of(point, Launch::gemm)) gemm_ns += span_ns, gemm_spans.push_back(span_ns);
    if (r.region == region_of(point, Launch::add)) add_ns += span_ns;
    if (r.region == region_of(point, Launch::idle)) idle_ns += span_ns;
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
  // A unit of one kernel: the median kernel's throughput; of several (grouped GEMM, attention): their total's.
  const double flops_per_kernel = unit.flops() / burst.kernels_per_unit;
  if (!gemm_spans.empty()) {
    const double kernels = static_cast<double>(gemm_spans.size());
    reading.gemm_tflops = burst.kernels_per_unit == 1 ? flops_per_kernel / median_or_zero(gemm_spans) * 1e-3
                                                       : flops_per_kernel * kernels / gemm_ns * 1e-3;
    reading.gemm_clock_MHz = reading.gemm_tflops / burst.gemm_tflops_per_MHz;
  }
  const double counted_s = static_cast<double>(counted_last_ns - counted_first_ns) * 1e-9;
  reading.idle_share = idle_ns * 1e-9 / counted_s;
  reading.flops_per_s = flops_per_kernel * static_cast<double>(gemm_spans.size()) / counted_s;
  reading.bytes_per_s = kAddBytes * adds / counted_s;
  return reading;
}

// `region` (GEMMs), + 1 (adds), + 2 and + 3 (the probes before and after the GEMMs).
Burst burst_of(Load& load, CuptiKernelTimer& timer, std::uint64_t region) {
  load.launch(Launch::gemm, timer, region);  // cuBLASLt's first launch of a problem, not timed
  TWIN_CUDA_CHECK(cudaStreamSynchronize(load.stream));
  timer.collect();
  load.launch(Launch::probe_after_adds, timer, region + 2);
  for (int i = 0; i < kBurstGemms; ++i) load.launch(Launch::gemm, timer, region);
  load.launch(Launch::probe_after_gemms, timer, region + 3);
  for (int i = 0; i < kBurstGemms; ++i) load.launch(Launch::add, timer, region + 1);
  TWIN_CUDA_CHECK(cudaStreamSynchronize(load.stream));
  std::vector<double> gemm, add, probes;
  for (const KernelRecord& r : timer.collect()) {
    const double span_ns = static_cast<double>(r.end_ns - r.start_ns);
    if (r.is_memcpy) continue;
    if (r.region == region) gemm.push_back(span_ns);
    if (r.region == region + 1) add.push_back(span_ns);
    if (r.region == region + 2 || r.region == region + 3) probes.push_back(clock_probe_MHz(span_ns));
  }
  if (gemm.empty() || add.empty() || probes.size() != 2 || gemm.size() % kBurstGemms != 0)
    throw std::runtime_error("sustained clock: CUPTI recorded no GEMM, add or clock probe of the burst, or a unit's "
                             "kernels not the same number each time");
  Burst burst;
  burst.kernels_per_unit = static_cast<double>(gemm.size() / kBurstGemms);
  double unit_total_ns = 0;
  for (double span_ns : gemm) unit_total_ns += span_ns;
  // One kernel per unit: its median span (as the curve always read it); several: their total over the units.
  burst.gemm_ns = burst.kernels_per_unit == 1 ? percentile(gemm, 0.5) : unit_total_ns / kBurstGemms;
  burst.add_ns = percentile(add, 0.5);
  const double clock_MHz = (probes[0] + probes[1]) / 2;  // as calibration's shapes: the mean of the two probes
  burst.probe_ns = clock_probe_MHz(1) / clock_MHz;  // kClockProbeCycles cycles at that clock
  burst.gemm_tflops_per_MHz = load.unit->flops() / burst.gemm_ns * 1e-3 / clock_MHz;
  return burst;
}

// What one period of a load runs: GEMMs then a probe, adds then a probe; neither: one probe (the one-thread load).
struct PeriodMix {
  int gemms = kGemmsPerPeriod, adds = 0;
  int idles = 0;  // one-thread probes after the units (the SMs idle), in place of adds
};

PeriodMix mix_at(double duty, double gemm_ns, double add_ns) {
  return {kGemmsPerPeriod, static_cast<int>(std::lround(kGemmsPerPeriod * gemm_ns * (1 - duty) / (duty * add_ns)))};
}

// The units beside idle SMs: the one-thread probe fills the share 1 - duty of the period.
PeriodMix idle_mix_at(double duty, const Burst& burst) {
  return {kGemmsPerPeriod, 0,
          static_cast<int>(std::lround(kGemmsPerPeriod * burst.gemm_ns * (1 - duty) / (duty * burst.probe_ns)))};
}

// Enqueues `seconds` of periods of `mix` under `point`'s regions; with `window`, its energy marks at the end of the
// settling part and at the end, and its clock samples spread evenly between them.
void run_point(Load& load, CuptiKernelTimer& timer, std::size_t point, PeriodMix mix, double seconds, double gemm_ns,
               double add_ns, StreamWindow* window = nullptr) {
  const double probe_ns = kClockProbeCycles / 2.0;  // ~100 us at the clocks a Hopper GPU runs
  const double work_ns = mix.gemms * gemm_ns + mix.adds * add_ns + mix.idles * probe_ns;
  const double period_ns = work_ns > 0 ? work_ns : probe_ns;
  const long periods = std::max(1l, std::lround(seconds * 1e9 / period_ns));
  const long settled =
      window ? std::min(periods - 1, std::lround(std::ceil(window->settle_s() * 1e9 / period_ns))) : -1;
  const long sample_every =
      window ? std::max(1l, (periods - settled) / static_cast<long>(window->clock_samples_wanted())) : 0;
  for (long p = 0; p < periods; ++p) {
    if (p == settled) window->mark_start(load.stream);
    if (window && p >= settled && (p - settled) % sample_every == 0) window->sample_clock(load.stream);
    for (int g = 0; g < mix.gemms; ++g) load.launch(Launch::gemm, timer, region_of(point, Launch::gemm));
    if (mix.gemms > 0) load.launch(Launch::probe_after_gemms, timer, region_of(point, Launch::probe_after_gemms));
    for (int i = 0; i < mix.adds; ++i) load.launch(Launch::add, timer, region_of(point, Launch::add));
    for (int i = 0; i < mix.idles; ++i) load.launch(Launch::idle, timer, region_of(point, Launch::idle));
    if (mix.adds > 0 || mix.gemms == 0)
      load.launch(Launch::probe_after_adds, timer, region_of(point, Launch::probe_after_adds));
  }
  if (window) window->mark_end(load.stream);
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
  std::optional<StreamWindow> window;
  if (nvml) window.emplace(*nvml, settle_s, kNvmlClockSamples);
  run_point(load, timer, point, mix, seconds, burst.gemm_ns, burst.add_ns, window ? &*window : nullptr);
  TWIN_CUDA_CHECK(cudaStreamSynchronize(load.stream));
  SustainedClockReading reading = reading_of(timer.collect(), *load.unit, point, settle_s * 1e9, burst);
  if (window) {
    reading.power_W = window->power_W();
    reading.nvml_sm_clock_MHz = window->median_sm_clock_MHz();
    reading.power_cap_W = nvml->power_limit_W();
  }
  return reading;
}

}  // namespace

namespace {

// The power model's loads after the curve's (SustainedClockLoad's order), each `power_load_s` long with its first
// `power_load_settle_s` not counted, the GPU as hot as in the curve's points. `next_point`: the first free point.
void measure_power_loads(const SustainedClockLoad& plan, Load& curve_load, const Burst& curve_burst,
                         CuptiKernelTimer& timer, const NvmlPower* nvml, std::size_t next_point,
                         std::vector<SustainedClockReading>& readings) {
  const double s = plan.power_load_s, settle_s = plan.power_load_settle_s;
  // The memory-only and one-thread loads do not reach the cap, so the limiter has nothing to settle: a short
  // settling part (the clock's ramp) is enough.
  readings.push_back(
      measure_point(curve_load, timer, nvml, next_point++, {0, kAddsPerMemoryPeriod}, s, settle_s, curve_burst));
  readings.push_back(measure_point(curve_load, timer, nvml, next_point++, {0, 0}, s, settle_s, curve_burst));
  // The curve's GEMMs beside idle SMs: where the power stays under the cap they run at the maximum clock. The
  // limiter may need its settling time here (a duty near the cap): the curve's.
  for (double duty : plan.idle_gemm_duties) {
    if (!(duty > 0 && duty <= 1)) throw std::invalid_argument("power loads: a GEMM duty outside (0, 1]");
    readings.push_back(measure_point(curve_load, timer, nvml, next_point++, idle_mix_at(duty, curve_burst), s,
                                     plan.settle_s, curve_burst));
  }
  if (!plan.held_out_loads) return;
  // The held-out loads at full duty, each with its own burst (the period sized by its unit).
  for (int kind = 0; kind < 2; ++kind) {
    Load load(curve_load.stream, kind == 0 ? gemm_unit(expert_load_shape(), curve_load.stream)
                                           : attention_unit(attention_load_shape(), curve_load.stream));
    const Burst burst = burst_of(load, timer, region_of(next_point++, Launch::gemm));
    readings.push_back(measure_point(load, timer, nvml, next_point++, {}, s, plan.settle_s, burst));
  }
}

}  // namespace

std::vector<std::string> power_load_names(const SustainedClockLoad& plan) {
  std::vector<std::string> names{"memory-only load", "one-thread load"};
  for (double duty : plan.idle_gemm_duties)
    names.push_back(fmt::format("GEMMs beside the one-thread probe at duty {:.2f}", duty));
  if (plan.held_out_loads) {
    names.push_back("held out: the experts' grouped GEMM " + fmt::format("{}x{}x{} x {} groups", expert_load_shape().m,
                                                                          expert_load_shape().n, expert_load_shape().k,
                                                                          expert_load_shape().count));
    names.push_back("held out: attention forward and backward");
  }
  return plan.power_load_s > 0 ? names : std::vector<std::string>{};
}

std::vector<SustainedClockReading> measure_sustained_clock(const SustainedClockLoad& load_plan) {
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<SustainedClockReading> readings;
  {
    Load load(stream, gemm_unit(sustained_clock_load_gemm(load_plan.gemm_inputs), stream));
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
    if (load_plan.power_load_s > 0)
      measure_power_loads(load_plan, load, burst, timer, nvml.get(), points + 3, readings);
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return readings;
}

namespace {

// The power model of the median readings, or none where they cannot carry one (the reason logged). Fitted on the pure
// loads: the curve's full-duty GEMMs, the memory-only and one-thread loads and the GEMMs beside idle SMs; the curve's
// GEMMs beside adds and the held-out loads predicted by it (calibrate/power_model_fit.hpp).
PowerModel power_model_of(const std::vector<std::vector<SustainedClockReading>>& per_gpu, const SustainedClockLoad& plan,
                          const std::function<void(const std::string&)>& progress) {
  const std::size_t duties = plan.gemm_duties.size();
  const std::vector<std::string> names = power_load_names(plan);
  if (names.empty() || per_gpu.front().size() != duties + names.size()) return {};
  std::vector<SustainedClockReading> gemm_loads;
  std::vector<std::pair<SustainedClockReading, std::string>> held_out;
  for (std::size_t p = 0; p < duties; ++p) {
    const SustainedClockReading reading = median_reading(per_gpu, p);
    if (plan.gemm_duties[p] == 1.0) gemm_loads.push_back(reading);
    else held_out.emplace_back(reading, fmt::format("held out: GEMMs beside adds at duty {:.3f}", reading.gemm_duty));
  }
  const std::size_t idle_first = duties + 2, held_out_first = idle_first + plan.idle_gemm_duties.size();
  for (std::size_t p = idle_first; p < held_out_first; ++p) gemm_loads.push_back(median_reading(per_gpu, p));
  for (std::size_t p = held_out_first; p < duties + names.size(); ++p)
    held_out.emplace_back(median_reading(per_gpu, p), names[p - duties]);
  try {
    PowerModelFit fit = fit_power_model(gemm_loads, median_reading(per_gpu, duties), median_reading(per_gpu, duties + 1));
    for (const auto& [reading, name] : held_out) fit.points.push_back(predict_load(fit.model, reading, name));
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
                     "TFLOP/s, {:.0f} MHz by the GEMMs' cycles, {:.0f} MHz by NVML; {:.1f} W (cap {:.0f} W), {:.1f} "
                     "TFLOP/s and {:.0f} GB/s of busy time, {:.3f} of it idle SMs",
                     reading.gemm_duty, reading.sm_clock_MHz, after_memory, reading.gemm_tflops, reading.gemm_clock_MHz,
                     reading.nvml_sm_clock_MHz, reading.power_W, reading.power_cap_W, reading.flops_per_s * 1e-12,
                     reading.bytes_per_s * 1e-9, reading.idle_share);
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
      const std::string what = p < duties ? "" : " " + power_load_names(load).at(p - duties) + ":";
      progress(fmt::format("sustained clock ({} GEMMs), GPU {}:{} {}", to_string(load.gemm_inputs), r, what,
                           describe_reading(per_gpu.back()[p])));
    }
  }
  SustainedClockMeasurement measured;
  measured.curve = sustained_clock_curve(curve_per_gpu);
  for (const std::string& line : describe_sustained_clock(measured.curve))
    progress(fmt::format("sustained clock ({} GEMMs): {}", to_string(load.gemm_inputs), line));
  measured.power = power_model_of(per_gpu, load, progress);
  return measured;
}

}  // namespace twin::gpu
