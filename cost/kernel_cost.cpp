// The kernel cost model: GEMM and attention by FLOPs at a saturating fraction of peak (GEMMs with a
// memory floor), everything else by bytes at a saturating fraction of HBM bandwidth; measured exact
// shapes win, and the measured shapes of a kind correct the model for shapes near them
// (gemm_predictor.hpp, kernel_predictor.hpp); shapes traced runs measured scale the result (in_situ.hpp).
// The bytes each op moves are cost/compute_kinds.cpp's.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/attention_flops.hpp"
#include "core/unfused_loss.hpp"
#include "core/op_kinds.hpp"
#include "cost/attention_dropout.hpp"
#include "cost/attention_waves.hpp"
#include "cost/gemm_predictor.hpp"
#include "cost/in_situ.hpp"
#include "cost/sm_clock.hpp"
#include "cost/kernel_predictor.hpp"
#include "cost/memory_bound_bytes.hpp"
#include "cost/profile.hpp"
#include "cost/unfused_attention.hpp"

namespace twin {

namespace {

void require_compute(const Op& op, const char* function) {
  if (op.is_communication())
    throw std::logic_error(fmt::format("{} called for communication op {}", function, op_name(op)));
}

double gemm_flops(const GemmShape& g) { return 2.0 * g.m * g.n * g.k * g.count; }
// The tensor-core peak a GEMM's operands run at: FP8's for FP8 operands (whatever their scaling), else bf16's.
double gemm_peak_tflops(const GemmShape& g, const GpuSpec& gpu) {
  return is_fp8(g) ? gpu.peak_fp8_tflops : gpu.peak_bf16_tflops;
}

double seconds_to_ns(double flops, double tflops) { return flops / (tflops * 1e3); }  // 1 TFLOP/s = 1e3 FLOP/ns

double bandwidth_time_ns(double bytes, const GpuSpec& gpu, const SaturatingEfficiency& eff) {
  if (bytes <= 0) return 0;
  return transfer_ns(bytes, gpu.hbm_bandwidth_GBps * eff.at(bytes));
}

// A group of GEMMs (count > 1) runs as count calls one after another (gpu/grouped_matmul.hpp: one cuBLASLt call per
// group, the executor's and the calibration's alike), each with its own tiles, waves and efficiency: count times one
// call's time, not one GEMM of count times the FLOPs (which priced 64 experts' 256-row GEMMs at a sixth of the time
// they ran on an H200, docs/ACCURACY.md "Grouped GEMMs as the calls they are"). One call: its compute at the curve's
// efficiency for its FLOPs (times the tiles' work over the useful work when `padded`), or its operands' traffic,
// whichever is longer.
double grouped_calls_ns(const GemmShape& g, const GpuSpec& gpu, const GpuKernelProfile& k, bool padded) {
  GemmShape call = g;
  call.count = 1;
  const double flops = gemm_flops(call);
  const double compute_ns = flops <= 0 ? 0 : seconds_to_ns(flops, gemm_peak_tflops(call, gpu) * k.gemm.at(flops));
  const double padding = padded ? gemm_tile_work_factor(call, gpu.sm_count) : 1.0;
  return double(g.count) * std::max(compute_ns * padding, bandwidth_time_ns(gemm_bytes(call), gpu, k.memory_bound));
}

// The curve's price where no GEMM was measured.
double gemm_time_ns(const GemmShape& g, const GpuSpec& gpu, const GpuKernelProfile& k) {
  return grouped_calls_ns(g, gpu, k, false);
}

// The carrier that measured GEMM efficiencies scale: the tiles' padding and last wave multiply the compute, not
// the operands' traffic (a narrow GEMM's padded tile columns compute zeros but read nothing more). Multiplying
// both priced the MoE router's GEMM (n = 8 experts, 16x padding in a 128-wide tile) at 176 us on an H200
// where it ran in 17 us (docs/ACCURACY.md, MoE).
double gemm_model_ns(const GemmShape& g, const GpuSpec& gpu, const GpuKernelProfile& k) {
  return grouped_calls_ns(g, gpu, k, true);
}

// Unfused attention kernel by kernel (cost/unfused_attention.hpp): a batched GEMM's FLOPs at the GEMM curve plus its
// pass over the scores (its header says why not the longer of the two), softmax and dropout by their bytes.
double unfused_attention_time_ns(const Op& op, const GpuSpec& gpu, const GpuKernelProfile& k) {
  double ns = 0;
  for (const UnfusedAttentionKernel& kernel : unfused_attention_kernels(op)) {
    ns += bandwidth_time_ns(kernel.score_bytes, gpu, k.memory_bound);
    if (kernel.flops > 0) ns += seconds_to_ns(kernel.flops, gpu.peak_bf16_tflops * k.gemm.at(kernel.flops));
  }
  return ns;
}

double attention_time_ns(const Op& op, const GpuSpec& gpu, const GpuKernelProfile& k) {
  const bool backward = op.kind == OpKind::attention_backward;
  const double flops = attention_flops(op.attention, backward);
  if (flops <= 0) return 0;
  if (!op.attention.flash) return unfused_attention_time_ns(op, gpu, k);
  const SaturatingEfficiency& eff = op.attention.cudnn ? (backward ? k.fused_attention_backward : k.fused_attention_forward)
                                                       : (backward ? k.attention_backward : k.attention_forward);
  return seconds_to_ns(flops, gpu.peak_bf16_tflops * eff.at(flops));
}

}  // namespace


namespace {

// The efficiency curves alone: the carrier that interpolation among measured shapes scales.
double curve_time_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op) {
  switch (op_kind_traits(op.kind).pricing) {
    case OpPricing::gemm: return gemm_time_ns(op.gemm, gpu, kernels);
    case OpPricing::attention: return attention_time_ns(op, gpu, kernels);
    case OpPricing::memory_bound: return bandwidth_time_ns(memory_bound_bytes(op), gpu, kernels.memory_bound);
    case OpPricing::collective:
    case OpPricing::point_to_point: break;
  }
  throw std::logic_error("kernel time asked of communication op " + op_name(op));
}

// An FP8 GEMM's product where the profile measured no FP8 GEMM: the BF16 price of the same shape (its
// measurement, the interpolation among measured BF16 shapes, or the curve: the efficiency twin knows at that
// shape) at the FP8 peak, time x peak_bf16 / peak_fp8. A stated assumption, not a fit (docs/PROFILES.md,
// "FP8 GEMMs"): FP8 kernels reach another fraction of their peak than BF16's, and calibration measures it.
double fp8_product_from_bf16_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op) {
  Op bf16 = op;
  bf16.gemm.inputs = GemmInputs::bf16;
  bf16.gemm.e5m2 = false;
  bf16.fuses_residual = false;  // the epilogue's bytes are priced beside the product
  bf16.gemm_output = GemmOutput::written;
  return benchmark_kernel_time_ns(kernels, gpu, bf16) * gpu.peak_bf16_tflops / gpu.peak_fp8_tflops;
}

// The product's time of a GEMM with no exact entry: interpolated among the measured shapes of its operands
// (BF16 among measured_gemms, FP8 among measured_fp8_gemms), an FP8 one from its BF16 price where the profile
// measured none, the curve where nothing is measured.
double gemm_product_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op) {
  const bool fp8 = is_fp8(op.gemm);
  const std::vector<MeasuredGemm>& measured = fp8 ? kernels.measured_fp8_gemms : kernels.measured_gemms;
  if (fp8 && measured.empty()) return fp8_product_from_bf16_ns(kernels, gpu, op);
  if (measured.empty() || gemm_flops(op.gemm) <= 0) return curve_time_ns(kernels, gpu, op);
  return predict_gemm_time_ns(measured, op.gemm, [&](const GemmShape& g) { return gemm_model_ns(g, gpu, kernels); });
}

// The model's kernel time for a shape with no exact entry: interpolated among the measured shapes of its
// kind (GEMMs as gemm_product_ns says), the curves where the kind has none.
double model_time_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op) {
  const bool gemm = op.kind == OpKind::gemm || op.kind == OpKind::moe_router;
  if (gemm) {
    const double product_ns = gemm_product_ns(kernels, gpu, op);
    // The residual an epilogue adds is priced as a read beside the product's time: an upper bound, since
    // the epilogue's loads of C overlap part of the main loop; the runs' traces measure the fused GEMMs. (A gradient
    // buffer's GEMM never comes here: benchmark_kernel_time_ns prices it from its written twin.)
    return product_ns + bandwidth_time_ns(epilogue_addend_bytes(op), gpu, kernels.memory_bound);
  }
  const auto curve = [&](const Op& other) { return curve_time_ns(kernels, gpu, other); };
  const bool flash_attention =
      (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) && op.attention.flash;
  if (flash_attention) return predict_attention_time_ns(kernels.measured_kernels, op, gpu.sm_count, curve);
  return predict_kernel_time_ns(kernels.measured_kernels, op, curve);
}

}  // namespace

double in_situ_prior_of(const InSituPrior& prior, const Op& op) {
  switch (op_kind_traits(op.kind).pricing) {
    case OpPricing::gemm: return prior.gemm;
    case OpPricing::attention: return prior.attention;
    case OpPricing::memory_bound:
    case OpPricing::collective:
    case OpPricing::point_to_point: return prior.memory_bound;
  }
  return prior.memory_bound;
}

namespace {

bool is_split_gemm(const Op& op) { return op.kind == OpKind::gemm && op.gemm.split > 1; }

bool is_skewed_group(const Op& op) {
  return op.kind == OpKind::gemm && op.gemm.count > 1 && op.gemm.busiest > 0;
}

// The kernels an op launches: a grouped GEMM one per problem, unfused attention one per kernel of
// cost/unfused_attention.hpp, an unfused loss one per pass of core/unfused_loss.hpp, every other op one.
double kernel_launches(const Op& op) {
  if (op.kind == OpKind::gemm) return std::max(1, op.gemm.count);
  const bool attention = op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward;
  if (attention && !op.attention.flash) return static_cast<double>(unfused_attention_kernels(op).size());
  if (op.unfused_loss && op.kind == OpKind::loss_forward) return kUnfusedLossForwardBytesPerLogit.size();
  if (op.unfused_loss && op.kind == OpKind::loss_backward) return kUnfusedLossBackwardBytesPerLogit.size();
  return 1;
}

// A grouped GEMM's calls are issued one by one by the host (gpu/grouped_matmul.hpp); once the host has no lead over
// the device (after the MoE dispatch's host read), no call starts before the host has issued it, so the op takes at
// least its calls times the measured issue time. (With a lead, as in a backward, the floor overstates it.)
bool is_grouped_gemm(const Op& op) { return op.kind == OpKind::gemm && op.gemm.count > 1; }

TimeNs host_issue_floor_ns(const GpuKernelProfile& kernels, const Op& op) {
  return std::llround(kernels.grouped_gemm_issue_ns * op.gemm.count);
}

// A skewed group is priced by its parts unless the profile holds its own shape (a run traced it).
bool priced_by_parts(const GpuKernelProfile& kernels, const Op& op) {
  return is_skewed_group(op) && !kernels.measured.count(kernel_shape_key(op));
}

// The whole GEMM a split chunk is one part of.
Op whole_gemm(const Op& chunk) {
  Op whole = chunk;
  whole.gemm.m *= chunk.gemm.split;
  whole.gemm.split = 1;
  whole.flops *= chunk.gemm.split;
  return whole;
}

// A GEMM whose product goes into a gradient buffer (Op::gemm_output), where its own kind is not measured, is priced as
// the same product written in bf16 (its twin: measured, traced or modelled as any GEMM) plus the bytes its epilogue
// moves beyond it at the memory-bound curve (cost/compute_kinds.cpp: an fp32 buffer's wider write).
Op written_twin(const Op& op) {
  Op written = op;
  written.gemm_output = GemmOutput::written;
  return written;
}
double beyond_written_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op) {
  const double beyond = epilogue_addend_bytes(op) - epilogue_addend_bytes(written_twin(op));
  return bandwidth_time_ns(beyond, gpu, kernels.memory_bound);
}

}  // namespace

double benchmark_kernel_time_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op) {
  require_compute(op, "benchmark_kernel_time_ns");
  if (is_split_gemm(op)) return benchmark_kernel_time_ns(kernels, gpu, whole_gemm(op)) / op.gemm.split;
  if (priced_by_parts(kernels, op)) {
    double sum = 0;
    for (const Op& part : gemm_group_parts(op)) sum += benchmark_kernel_time_ns(kernels, gpu, part);
    return sum;
  }
  if (auto found = kernels.measured.find(kernel_shape_key(op)); found != kernels.measured.end())
    if (const double benchmark_ns = benchmark_time_ns(found->second); benchmark_ns > 0) return benchmark_ns;
  if (op.gemm_output != GemmOutput::written)  // unmeasured so: the product written in bf16, plus the wider write
    return benchmark_kernel_time_ns(kernels, gpu, written_twin(op)) + beyond_written_ns(kernels, gpu, op);
  if (fused_attention_dropout(op)) {  // unmeasured with its draws: the same attention without them, plus the draws
    Op plain = op;
    plain.attention.dropout = false;
    plain.dropout = 0;
    return benchmark_kernel_time_ns(kernels, gpu, plain) + fused_attention_dropout_ns(op, gpu, kernels);
  }
  return model_time_ns(kernels, gpu, op);
}

namespace {

// The step's clock for `op`: a GEMM's where the step holds one (StepClock::gemm_MHz), else the SM clock's (0: none).
double step_clock_MHz(const Op& op, StepClock step_clock) {
  return op.kind == OpKind::gemm && step_clock.gemm_MHz > 0 ? step_clock.gemm_MHz : step_clock.sm_MHz;
}

// How much longer `op` runs at the step's clock than at the profile's own: 1 where the profile states a sustained
// clock (it wins, as in training_clock_time_ns), the step holds none, or the kind does not follow the SM clock.
double step_clock_ratio(const GpuKernelProfile& kernels, const Op& op, StepClock step_clock) {
  const double exponent = priced_sm_clock_exponent(kernels, op);
  if (exponent == 0 || kernels.sustained_sm_clock_MHz > 0) return 1;
  return time_at_sm_clock_ns(1.0, kernels.reference_sm_clock_MHz, step_clock_MHz(op, step_clock), exponent);
}

// The clock a step's kernels that follow the SM clock are priced at: the profile's stated sustained clock (it wins),
// else the step's for `op`, else (a step without one, as a duty is priced) the reference clock the benchmarks are at.
double pricing_sm_clock_MHz(const GpuKernelProfile& kernels, const Op& op, StepClock step_clock) {
  if (kernels.sustained_sm_clock_MHz > 0) return kernels.sustained_sm_clock_MHz;
  const double step_MHz = step_clock_MHz(op, step_clock);
  return step_MHz > 0 ? step_MHz : kernels.reference_sm_clock_MHz;
}

// The step's SM clock alone: what a traced shape, timed in a run at that run's SM clock, moves by. The GEMMs' clock
// (StepClock::gemm_MHz) is the throughput of the curve's load against its micro-benchmark, no clock a run reads: a
// traced GEMM holds its run's throughput already, and at its run's clock it is priced as measured.
StepClock sm_clock_only(StepClock step_clock) { return {step_clock.sm_MHz, 0}; }

// A shape a run traced, at the clock this step prices at: as measured where the entry does not state its run's
// clock (Measurement::run_sm_clock_MHz), else moved from that clock to the step's SM clock.
double traced_time_at_step_clock_ns(const GpuKernelProfile& kernels, const Op& op, const Measurement& traced,
                                    StepClock step_clock) {
  const double exponent = priced_sm_clock_exponent(kernels, op);
  if (exponent == 0 || traced.run_sm_clock_MHz <= 0) return traced.median_ns;
  return time_at_sm_clock_ns(traced.median_ns, traced.run_sm_clock_MHz,
                             pricing_sm_clock_MHz(kernels, op, sm_clock_only(step_clock)), exponent);
}

}  // namespace

// GEMMs are always timed at the reference clock (calibrate/gpu/gemm_calibration.cpp); the other kinds that follow the
// SM clock where the profile says its calibration probed and scaled them.
double priced_sm_clock_exponent(const GpuKernelProfile& kernels, const Op& op) {
  if (op.kind != OpKind::gemm && !kernels.attention_at_reference_clock) return 0;
  return sm_clock_exponent(op);
}

double training_clock_time_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op,
                              StepClock step_clock) {
  const double benchmark_ns = benchmark_kernel_time_ns(kernels, gpu, op);
  const double exponent = priced_sm_clock_exponent(kernels, op);
  if (exponent == 0) return benchmark_ns;
  return time_at_sm_clock_ns(benchmark_ns, kernels.reference_sm_clock_MHz, pricing_sm_clock_MHz(kernels, op, step_clock),
                             exponent);
}

namespace {

// The least time the op's FLOPs take at the GPU's stated bf16 peak (an FP8 GEMM's: at its fp8 peak). A measured profile times shapes on the GPU
// it measured; a scenario that states a lower peak for that GPU (a preset with peak_bf16_tflops overridden)
// would otherwise get those times, and results above 100% MFU.
TimeNs peak_flops_floor_ns(const GpuSpec& gpu, const Op& op) {
  if (!(gpu.peak_bf16_tflops > 0)) return 0;  // a spec without a peak (tests' bare GPUs) bounds nothing
  switch (op_kind_traits(op.kind).pricing) {
    case OpPricing::gemm:
      if (!(gemm_peak_tflops(op.gemm, gpu) > 0)) return 0;
      return std::llround(std::ceil(seconds_to_ns(gemm_flops(op.gemm), gemm_peak_tflops(op.gemm, gpu))));
    case OpPricing::attention: return std::llround(std::ceil(seconds_to_ns(attention_flops(op.attention, op.kind == OpKind::attention_backward), gpu.peak_bf16_tflops)));
    case OpPricing::memory_bound:
    case OpPricing::collective:
    case OpPricing::point_to_point: break;
  }
  return 0;
}

TimeNs profile_time_ns(const Profile& profile, const GpuSpec& gpu, const Op& op, StepClock step_clock);

}  // namespace

// No price beats the stated peak, whatever the profile says, nor the host's pace of issuing a grouped GEMM's calls.
TimeNs compute_time_ns(const Profile& profile, const GpuSpec& gpu, const Op& op, StepClock step_clock) {
  require_compute(op, "compute_time_ns");
  const TimeNs price_ns = std::max(profile_time_ns(profile, gpu, op, step_clock), peak_flops_floor_ns(gpu, op));
  return is_grouped_gemm(op) ? std::max(price_ns, host_issue_floor_ns(profile.kernels_for(gpu), op)) : price_ns;
}

namespace {

// The profile's price: a time measured in a training step, the benchmark or model price scaled in situ.
TimeNs profile_time_ns(const Profile& profile, const GpuSpec& gpu, const Op& op, StepClock step_clock) {
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  if (op.gemm_output != GemmOutput::written && !kernels.measured.count(kernel_shape_key(op))) {
    // Its twin's price (traced, or scaled in situ as any GEMM's), the kernel part longer by the benchmark ratio.
    const Op twin = written_twin(op);
    const double twin_ns = benchmark_kernel_time_ns(kernels, gpu, twin);
    const double ratio = twin_ns > 0 ? benchmark_kernel_time_ns(kernels, gpu, op) / twin_ns : 1.0;
    const double launches_ns = kernels.launch_overhead_ns * kernel_launches(twin);
    const double twin_price_ns = double(compute_time_ns(profile, gpu, twin, step_clock));
    return std::llround(launches_ns + (twin_price_ns - launches_ns) * ratio);
  }
  if (is_split_gemm(op)) {
    const double whole_kernel_ns = double(compute_time_ns(profile, gpu, whole_gemm(op), step_clock)) - kernels.launch_overhead_ns;
    return std::llround(whole_kernel_ns / op.gemm.split + kernels.launch_overhead_ns);
  }
  if (auto found = kernels.measured.find(kernel_shape_key(op));
      found != kernels.measured.end() && !found->second.source.empty())  // measured in a training step
    return std::llround(traced_time_at_step_clock_ns(kernels, op, found->second, step_clock) +
                        kernels.launch_overhead_ns);
  // A grouped GEMM launches one kernel per problem (gpu/grouped_matmul.hpp), and the launch overhead is the gap
  // every kernel leaves: paid once per call, not once per op.
  const double launches_ns = kernels.launch_overhead_ns * kernel_launches(op);
  if (priced_by_parts(kernels, op)) {  // each part at its own price
    double kernel_sum_ns = 0;
    for (const Op& part : gemm_group_parts(op)) {
      const double part_launches_ns = kernels.launch_overhead_ns * kernel_launches(part);
      kernel_sum_ns += double(compute_time_ns(profile, gpu, part, step_clock)) - part_launches_ns;
    }
    return std::llround(kernel_sum_ns + launches_ns);
  }
  // Priced at the profile's own clock, the basis traced ratios were measured against (calibrate/recalibration.hpp):
  // they hold the run's clock (or, stating it, leave it out and take the step's), so the step's clock joins the prior,
  // which rules alone where no traced shape is near (another model's attention, GEMMs of another width, a profile
  // without traces) and which traced shapes near the op outweigh.
  // Traced ratios that leave their run's clock out take the step's SM clock back (sm_clock_only says why).
  const double prior = in_situ_prior_of(kernels.in_situ_prior, op) * step_clock_ratio(kernels, op, step_clock);
  const double traced_clock_ratio = step_clock_ratio(kernels, op, sm_clock_only(step_clock));
  double kernel_ns = training_clock_time_ns(kernels, gpu, op);
  if (!kernels.trace_shapes.empty() || prior != 1.0)
    kernel_ns *= in_situ_ratio(kernels.trace_shapes, op, prior, traced_clock_ratio);
  return std::llround(kernel_ns + launches_ns);
}

}  // namespace

std::vector<Op> gemm_group_parts(const Op& op) {
  if (!is_skewed_group(op)) return {op};
  // The routed rows are m, or k in a weight gradient (the rows are the reduction there).
  const bool rows_are_k = op.gemm_pass == GemmPass::weight_gradient;
  const std::int64_t mean = rows_are_k ? op.gemm.k : op.gemm.m;
  const std::int64_t others = op.gemm.count - 1;
  const std::int64_t busiest = std::min<std::int64_t>(op.gemm.busiest, mean * op.gemm.count);
  const std::int64_t rest = (mean * op.gemm.count - busiest + others - 1) / others;  // rounded up
  const auto part = [&](std::int64_t rows, int count) {
    Op p = op;
    (rows_are_k ? p.gemm.k : p.gemm.m) = rows;
    p.gemm.count = count;
    p.gemm.busiest = 0;
    p.flops = 2.0 * double(p.gemm.m) * double(p.gemm.n) * double(p.gemm.k) * count;
    return p;
  };
  std::vector<Op> parts{part(busiest, 1)};
  if (rest > 0) parts.push_back(part(rest, static_cast<int>(others)));
  return parts;
}

}  // namespace twin
