// The duty is priced with the same cache as flattening (at clock 0: the profile's reference), so the GEMM shapes
// priced here are priced once per search; a class's repeated blocks are summed like any other ops (memo hits).
// Only the passes count: the optimizer step runs once per iteration, briefly beside the limiter's time constant,
// and leaving it out makes the duty the same for any number of micro-batches, so that a pipeline's steady state
// replayed at two shorter counts (strategies/steady_state.hpp) is priced at the whole iteration's clock.
#include "sim/step_clock.hpp"

#include "core/op_kinds.hpp"
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

}  // namespace

StepDuty step_duty(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices) {
  ComputeTimes at_reference(profile, gpu, prices);
  // integers: the same passes summed N times give exactly the same ratios
  TimeNs busy_ns = 0, compute_bound_ns = 0, fp8_ns = 0;
  for (OpIndex i = 0; i < rank_class.size(); ++i) {
    const Op& op = rank_class.op(i);
    if (op.is_communication() || op.phase == Phase::optimizer) continue;
    const TimeNs ns = at_reference(op);
    busy_ns += ns;
    if (!compute_bound(op)) continue;
    compute_bound_ns += ns;
    if (op.kind == OpKind::gemm && is_fp8(op.gemm)) fp8_ns += ns;
  }
  StepDuty duty;
  if (busy_ns > 0) duty.duty = static_cast<double>(compute_bound_ns) / static_cast<double>(busy_ns);
  if (compute_bound_ns > 0) duty.fp8_share = static_cast<double>(fp8_ns) / static_cast<double>(compute_bound_ns);
  return duty;
}

StepClock step_clock(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices) {
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  // Traced shapes' in-situ ratios were taken against prices at the profile's own clock (calibrate/recalibration.hpp),
  // so they hold the training clock already: the curve on top would count it twice.
  if (kernels.sustained_sm_clock_MHz > 0 || kernels.sustained_clock.points.empty() || !kernels.trace_shapes.empty())
    return {};
  const StepDuty duty = step_duty(rank_class, profile, gpu, prices);
  return step_clock_at(kernels.sustained_clock, kernels.sustained_clock_fp8, duty.duty, duty.fp8_share);
}

}  // namespace twin::sim
