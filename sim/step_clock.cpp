// The duty is priced with the same cache as flattening (at clock 0: the profile's reference), so the GEMM shapes
// priced here are priced once per search; a class's repeated blocks are summed like any other ops (memo hits).
// Only the passes count: the optimizer step runs once per iteration, briefly beside the limiter's time constant,
// and leaving it out makes the duty the same for any number of micro-batches, so that a pipeline's steady state
// replayed at two shorter counts (strategies/steady_state.hpp) is priced at the whole iteration's clock.
#include "sim/step_clock.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <spdlog/spdlog.h>

#include "core/op_kinds.hpp"
#include "cost/gemm_rows_clock.hpp"
#include "cost/power_model.hpp"
#include "cost/sm_clock.hpp"
#include "cost/sustained_clock.hpp"
#include "sim/flat_pricing.hpp"

namespace twin::sim {
namespace {

bool compute_bound(const Op& op) {
  switch (op_kind_traits(op.kind).pricing) {
    case OpPricing::gemm:
    case OpPricing::attention: return true;
    case OpPricing::memory_bound:
    case OpPricing::collective:
    case OpPricing::point_to_point: return false;
  }
  return false;
}

// The FLOP rate of the load the sustained-clock curves were measured under (sustained_clock_load_gemm), as the profile
// prices that GEMM of `inputs` at the reference clock; per inputs, priced once.
class CurveLoadRate {
 public:
  CurveLoadRate(const Profile& profile, const GpuSpec& gpu) : kernels_(profile.kernels_for(gpu)), gpu_(gpu) {}
  double flops_per_ns(GemmInputs inputs) {
    double& rate = rates_[slot(inputs)];
    if (rate < 0) {
      Op curve_gemm;
      curve_gemm.kind = OpKind::gemm;
      curve_gemm.stream = Stream::compute;
      curve_gemm.gemm = sustained_clock_load_gemm(inputs);
      const GemmShape& g = curve_gemm.gemm;
      curve_gemm.flops = 2.0 * double(g.m) * double(g.n) * double(g.k) * g.count;
      const double ns = benchmark_kernel_time_ns(kernels_, gpu_, curve_gemm);
      rate = ns > 0 ? curve_gemm.flops / ns : 0;
    }
    return rate;
  }

 private:
  const GpuKernelProfile& kernels_;
  const GpuSpec& gpu_;
  // One slot per GemmInputs (a new kind of inputs is a missing case in slot(), which the compiler names).
  static std::size_t slot(GemmInputs inputs) {
    switch (inputs) {
      case GemmInputs::bf16: return 0;
      case GemmInputs::fp8_per_tensor: return 1;
      case GemmInputs::fp8_blockwise: return 2;
      case GemmInputs::mxfp8: return 3;
      case GemmInputs::fp8_blockwise_1d: return 4;
    }
    return 0;
  }
  std::array<double, 5> rates_{-1, -1, -1, -1, -1};  // -1: not priced yet
};

// A compute-bound op's time as the curve's load would count it: its FLOPs at that load's rate (GEMMs of its inputs;
// attention at BF16's), at most its own time. Power follows the FLOPs done (calibrate's power model put nine held-out
// steps within 5.2% per FLOP), so a step of small GEMMs, finishing fewer FLOPs per second than 8192^3 ones, draws
// less at the same share of time in them and holds a higher clock (docs/ACCURACY.md "The curve's duty in FLOPs").
TimeNs curve_load_ns(const Op& op, TimeNs ns, CurveLoadRate& curve_rate) {
  const double rate = curve_rate.flops_per_ns(op.kind == OpKind::gemm ? op.gemm.inputs : GemmInputs::bf16);
  if (!(rate > 0) || !(op.flops > 0)) return ns;
  return std::min<TimeNs>(ns, std::llround(op.flops / rate));
}

}  // namespace

StepWork step_work(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices) {
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  ComputeTimes at_reference(profile, gpu, prices);
  StepWork work;
  work.reference_sm_clock_MHz = kernels.reference_sm_clock_MHz;
  for (OpIndex i = 0; i < rank_class.size(); ++i) {
    const Op& op = rank_class.op(i);
    if (op.is_communication() || op.phase == Phase::optimizer) continue;
    const double ns = static_cast<double>(at_reference(op));
    // The share of its time that follows the SM clock: the exponent pricing moves it to the step's clock by
    // (cost/profile.hpp); one below 1 (attention) taken as that share scaling as 1/f and the rest fixed, within 1% of
    // f^-e over the clocks a limiter moves (+-25%).
    const double clocked = priced_sm_clock_exponent(kernels, op);
    work.clocked_ns += clocked * ns;
    work.unclocked_ns += (1 - clocked) * ns;
    if (compute_bound(op)) work.flops += op.flops;
    else work.bytes += memory_bound_bytes(op);
  }
  return work;
}

StepDuty step_duty(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices) {
  ComputeTimes at_reference(profile, gpu, prices);
  CurveLoadRate curve_rate(profile, gpu);
  // integers: the same passes summed N times give exactly the same ratios
  TimeNs busy_ns = 0, compute_bound_ns = 0, fp8_ns = 0;
  std::map<std::int64_t, double> forward_flops_by_rows;
  StepDuty duty;
  for (OpIndex i = 0; i < rank_class.size(); ++i) {
    const Op& op = rank_class.op(i);
    if (op.is_communication() || op.phase == Phase::optimizer) continue;
    const TimeNs ns = at_reference(op);
    busy_ns += ns;
    if (op.kind == OpKind::gemm) {
      duty.grouped_gemms |= op.gemm.count > 1;
      if (op.phase == Phase::forward) forward_flops_by_rows[op.gemm.m] += op.flops;
    }
    if (!compute_bound(op)) continue;
    const TimeNs load_ns = curve_load_ns(op, ns, curve_rate);
    compute_bound_ns += load_ns;
    if (op.kind == OpKind::gemm && is_fp8(op.gemm)) fp8_ns += load_ns;
  }
  if (busy_ns > 0) duty.duty = static_cast<double>(compute_bound_ns) / static_cast<double>(busy_ns);
  if (compute_bound_ns > 0) duty.fp8_share = static_cast<double>(fp8_ns) / static_cast<double>(compute_bound_ns);
  double most_flops = 0;  // the same passes N times: the same rows win (ties: the fewer rows, the first in the map)
  for (const auto& [rows, flops] : forward_flops_by_rows)
    if (flops > most_flops) {
      most_flops = flops;
      duty.gemm_rows = rows;
    }
  return duty;
}

namespace {

// The clock at which the curve's own load GEMM, priced from its micro-benchmark at the reference clock by the GEMM
// clock law (cost/sm_clock.hpp), takes the time the load measured for it at `duty` (gemm_tflops); 0 where the curve
// recorded no throughput or the profile prices no such GEMM.
double loaded_gemm_clock_MHz(const GpuKernelProfile& kernels, const SustainedClockCurve& curve, GemmInputs inputs,
                             double duty, CurveLoadRate& curve_rate) {
  const double loaded_tflops = loaded_gemm_tflops_at(curve, duty);
  const double benchmark_tflops = curve_rate.flops_per_ns(inputs) * 1e-3;
  Op load;
  load.kind = OpKind::gemm;
  load.gemm = sustained_clock_load_gemm(inputs);
  const double exponent = sm_clock_exponent(load);
  if (!(loaded_tflops > 0) || !(benchmark_tflops > 0) || !(exponent > 0) || !(kernels.reference_sm_clock_MHz > 0))
    return 0;
  return kernels.reference_sm_clock_MHz * std::pow(loaded_tflops / benchmark_tflops, 1 / exponent);
}

// The GEMMs' clock of a step of this duty and FP8 share, the two curves' loaded GEMM clocks mixed as step_clock_at
// mixes their probes' clocks; 0 where a curve the step needs recorded no throughput.
double step_gemm_clock_MHz(const Profile& profile, const GpuSpec& gpu, const StepDuty& duty) {
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  CurveLoadRate curve_rate(profile, gpu);
  const double bf16 = loaded_gemm_clock_MHz(kernels, kernels.sustained_clock, GemmInputs::bf16, duty.duty, curve_rate);
  if (kernels.sustained_clock_fp8.points.empty() || duty.fp8_share == 0 || bf16 == 0) return bf16;
  const double fp8 =
      loaded_gemm_clock_MHz(kernels, kernels.sustained_clock_fp8, GemmInputs::fp8_per_tensor, duty.duty, curve_rate);
  return fp8 > 0 ? (1 - duty.fp8_share) * bf16 + duty.fp8_share * fp8 : 0;
}

}  // namespace

StepClock step_clock(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices) {
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  // A profile with traced shapes gets the clock too: compute_time_ns applies it only as far as no traced shape near
  // an op prices it (their in-situ ratios hold the training clock already).
  const bool measured_clock = !kernels.sustained_clock.points.empty() || kernels.power_model.present();
  if (kernels.sustained_sm_clock_MHz > 0 || !measured_clock) return {};
  const StepDuty duty = step_duty(rank_class, profile, gpu, prices);
  // The curve prices where the profile has one: a fresh calibration's, which measures both, predicted 13 blind
  // one-H200 studies 1.24% mean with its curve and 2.17% with its power model, an OLMoE set 4.9% and 11.3%
  // (2026-12-01, docs/ACCURACY.md "A fresh calibration's step clock"). The power model prices a step without FP8 GEMMs
  // (calibration fits it on BF16 loads) in a profile without a BF16 curve; it needs the reference clock the GEMM
  // prices are at.
  const bool power_model_prices = kernels.power_model.present() && kernels.sustained_clock.points.empty();
  if (power_model_prices && duty.fp8_share == 0 && kernels.reference_sm_clock_MHz > 0) {
    const StepWork work = step_work(rank_class, profile, gpu, prices);
    const double clock_MHz = power_limited_clock_MHz(kernels.power_model, work);
    spdlog::debug("step clock of rank class {}: {:.0f} MHz at {:.0f} W by the power model ({:.0f} W at its maximum "
                  "{:.0f} MHz; {:.4f} TFLOP and {:.4f} GB over {:.4f} ms of compute at the reference clock)",
                  rank_class.index, clock_MHz, step_power_W(kernels.power_model, work, clock_MHz),
                  step_power_W(kernels.power_model, work, kernels.power_model.max_sm_clock_MHz),
                  kernels.power_model.max_sm_clock_MHz, work.flops * 1e-12, work.bytes * 1e-9,
                  (work.clocked_ns + work.unclocked_ns) * 1e-6);
    return {clock_MHz};
  }
  StepClock clock = step_clock_at(kernels.sustained_clock, kernels.sustained_clock_fp8, duty.duty, duty.fp8_share);
  // Fitted on dense BF16 steps (cost/gemm_rows_clock.hpp): a step with FP8 or grouped GEMMs keeps its curves' clock.
  const bool fitted_kind = duty.fp8_share == 0 && !duty.grouped_gemms;
  const double rows_factor =
      fitted_kind ? gemm_rows_clock_factor(kernels.gemm_rows_clock, static_cast<double>(duty.gemm_rows)) : 1.0;
  clock.sm_MHz *= rows_factor;
  clock.gemm_MHz = step_gemm_clock_MHz(profile, gpu, duty) * rows_factor;
  spdlog::debug("step clock of rank class {}: {:.0f} MHz by the sustained-clock curve at GEMM duty {:.3f}, GEMMs at "
                "{:.0f} MHz by the load's throughput (0: at the curve's), x{:.4f} for GEMM rows {}",
                rank_class.index, clock.sm_MHz, duty.duty, clock.gemm_MHz, rows_factor, duty.gemm_rows);
  return clock;
}

}  // namespace twin::sim
