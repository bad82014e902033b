// The kernel cost model against closed forms computed by hand from curves alone (the estimates the built-in
// profile held before it took measured Hopper kernels): GEMMs 0.80 * F / (F + 1.5e9) of the bf16 peak,
// attention 0.60 / 0.45, memory-bound 0.85 of HBM at half 4 MiB, 2 us launch.
#include <cmath>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "cost/sm_clock.hpp"
#include "tests/cost/curve_kernels.hpp"

namespace twin {
namespace {

const GpuSpec& h100() {
  static const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  return gpu;
}

const Profile& estimates() {
  static const Profile profile = [] {
    Profile p;
    p.name = "estimates";
    GpuKernelProfile k = testing::curve_kernels("H100-SXM-80GB");
    k.launch_overhead_ns = 2000;
    p.gpus = {k};
    return p;
  }();
  return profile;
}

Op gemm(std::int64_t m, std::int64_t n, std::int64_t k, int count = 1) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = {m, n, k, count};
  return op;
}

TEST(SaturatingEfficiency, HalfAtHalfWorkAndSaturates) {
  const SaturatingEfficiency e{0.8, 1.5e9};
  EXPECT_DOUBLE_EQ(e.at(1.5e9), 0.4);
  EXPECT_NEAR(e.at(1e15), 0.8, 1e-5);
  EXPECT_LT(e.at(1e8), e.at(1e9));
  EXPECT_DOUBLE_EQ(e.at(0), 0.8);
}

TEST(KernelCost, LargeGemmIsComputeBound) {
  // 8192^3: 1.0995e12 FLOPs at 989.4 TFLOP/s x 0.8 x f/(f + 1.5e9), plus 2 us launch.
  const double flops = 2.0 * 8192 * 8192 * 8192;
  const double efficiency = 0.8 * flops / (flops + 1.5e9);
  const double expected = flops / (989.4e12 * efficiency) * 1e9 + 2000;
  EXPECT_EQ(compute_time_ns(estimates(), h100(), gemm(8192, 8192, 8192)), std::llround(expected));
  // About 790 TFLOP/s achieved, the measured figure on this workplace's H100s.
  EXPECT_NEAR(flops / (expected - 2000) / 1e3, 790, 5);
}

TEST(KernelCost, SkinnyGemmHitsTheMemoryFloor) {
  // m = 1: the weight matrix dominates; 2 bytes x (k + k*n + n) at 3350 GB/s x 0.85 x b/(b + 4 MiB).
  const double bytes = 2.0 * (8192 + 8192.0 * 8192 + 8192);
  const double efficiency = 0.85 * bytes / (bytes + 4 * 1024 * 1024);
  const double expected = bytes / (3350 * efficiency) + 2000;
  EXPECT_EQ(compute_time_ns(estimates(), h100(), gemm(1, 8192, 8192)), std::llround(expected));
}

TEST(KernelCost, GroupedGemmScalesWithCount) {
  const TimeNs one = compute_time_ns(estimates(), h100(), gemm(4096, 4096, 4096));
  const TimeNs eight = compute_time_ns(estimates(), h100(), gemm(4096, 4096, 4096, 8));
  // count calls one after another (gpu/grouped_matmul.hpp), each a kernel with its launch overhead: count times one
  // call, to the nanosecond each was rounded to
  EXPECT_NEAR(double(eight), 8.0 * double(one), 8.0);
}

// The host issues a grouped GEMM's calls one by one (cost/profile.hpp grouped_gemm_issue_ns): calls shorter than
// the issue time run at the host's pace, longer ones at their own; a single GEMM has no such floor.
TEST(KernelCost, AGroupedGemmRunsNoFasterThanTheHostIssuesItsCalls) {
  Profile issued = estimates();
  issued.gpus[0].grouped_gemm_issue_ns = 20'000;
  const Op small = gemm(256, 1536, 2048, 128);  // ~2 us a call
  EXPECT_LT(compute_time_ns(estimates(), h100(), small), 128 * 20'000);
  EXPECT_EQ(compute_time_ns(issued, h100(), small), 128 * 20'000);
  const Op large = gemm(4096, 4096, 4096, 8);  // ~150 us a call
  EXPECT_EQ(compute_time_ns(issued, h100(), large), compute_time_ns(estimates(), h100(), large));
  const Op single = gemm(256, 1536, 2048);
  EXPECT_EQ(compute_time_ns(issued, h100(), single), compute_time_ns(estimates(), h100(), single));
}

TEST(KernelCost, FlashAttentionClosedForm) {
  Op op;
  op.kind = OpKind::attention_forward;
  op.attention = {2, 32, 8, 4096, 4096, 128, true, true};
  const double forward_flops = 4.0 * 2 * 32 * 4096 * 4096 * 128 / 2;  // causal halves it
  const double half = 1.5e9;
  const double forward_ns = forward_flops / (989.4e3 * 0.60 * forward_flops / (forward_flops + half)) + 2000;
  EXPECT_EQ(compute_time_ns(estimates(), h100(), op), std::llround(forward_ns));
  op.kind = OpKind::attention_backward;
  const double backward_flops = 2.5 * forward_flops;
  const double backward_ns = backward_flops / (989.4e3 * 0.45 * backward_flops / (backward_flops + half)) + 2000;
  EXPECT_EQ(compute_time_ns(estimates(), h100(), op), std::llround(backward_ns));
}

// The clock a training step holds (cost/profile.hpp sustained_sm_clock_MHz): a GEMM benchmarked at the
// reference clock is priced in cycles at the sustained one; attention and memory-bound kinds carry no clock.
TEST(KernelCost, GemmsRunAtTheSustainedClock) {
  Profile clocked = estimates();
  clocked.gpus[0].reference_sm_clock_MHz = 1800;
  clocked.gpus[0].sustained_sm_clock_MHz = 1500;
  const Op product = gemm(8192, 8192, 8192);
  const double at_reference_ns = double(compute_time_ns(estimates(), h100(), product)) - 2000;
  EXPECT_EQ(compute_time_ns(clocked, h100(), product), std::llround(at_reference_ns * 1.2 + 2000));
  EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), product),
                   benchmark_kernel_time_ns(clocked.gpus[0], h100(), product) * 1.2);
  Op attention;
  attention.kind = OpKind::attention_forward;
  attention.attention = {2, 32, 8, 4096, 4096, 128, true, true};
  EXPECT_EQ(compute_time_ns(clocked, h100(), attention), compute_time_ns(estimates(), h100(), attention));
  // Either clock unknown: as benchmarked.
  clocked.gpus[0].reference_sm_clock_MHz = 0;
  EXPECT_EQ(compute_time_ns(clocked, h100(), product), compute_time_ns(estimates(), h100(), product));
  // A shape a training run measured was timed at the training clock already.
  clocked.gpus[0].reference_sm_clock_MHz = 1800;
  Measurement traced{2e6, 2e6, 2e6, 3};  // 550 TFLOP/s: within the H100's stated peak
  traced.source = "trace:run";
  clocked.gpus[0].measured[kernel_shape_key(product)] = traced;
  EXPECT_EQ(compute_time_ns(clocked, h100(), product), 2000000 + 2000);
  // One that states its run's clock moves from it to the step's, where the curve gives each step its own.
  clocked.gpus[0].sustained_sm_clock_MHz = 0;
  clocked.gpus[0].measured[kernel_shape_key(product)].run_sm_clock_MHz = 1500;
  index_measured_shapes(clocked.gpus[0]);
  EXPECT_EQ(compute_time_ns(clocked, h100(), product, StepClock{1600}), std::llround(2e6 * 1500 / 1600 + 2000));
  // A GEMM clock from the curve's throughput does not move it: the run's time holds its throughput already.
  EXPECT_EQ(compute_time_ns(clocked, h100(), product, StepClock{1600, 1400}), std::llround(2e6 * 1500 / 1600 + 2000));
  // No step clock: at the reference clock, as the profile's other prices.
  EXPECT_EQ(compute_time_ns(clocked, h100(), product), std::llround(2e6 * 1500 / 1800 + 2000));
}

// A profile whose attention timings were scaled to the reference clock (calibration probes the clock beside each)
// prices attention at the training clock by attention's clock law (cost/sm_clock.hpp); memory-bound kernels still
// carry no clock.
TEST(KernelCost, AttentionAtTheReferenceClockRunsAtTheSustainedClock) {
  Profile clocked = estimates();
  clocked.gpus[0].reference_sm_clock_MHz = 1800;
  clocked.gpus[0].sustained_sm_clock_MHz = 1500;
  clocked.gpus[0].attention_at_reference_clock = true;
  for (const OpKind kind : {OpKind::attention_forward, OpKind::attention_backward}) {
    Op attention;
    attention.kind = kind;
    attention.attention = {2, 32, 8, 4096, 4096, 128, true, true};
    const double benchmark_ns = benchmark_kernel_time_ns(clocked.gpus[0], h100(), attention);
    const double exponent =
        kind == OpKind::attention_forward ? kAttentionForwardClockExponent : kAttentionBackwardClockExponent;
    EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), attention), benchmark_ns * std::pow(1.2, exponent));
    // Without a sustained clock in the profile, the step's clock (the curve's) is the one.
    clocked.gpus[0].sustained_sm_clock_MHz = 0;
    EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), attention, {2000}), benchmark_ns * std::pow(0.9, exponent));
    EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), attention), benchmark_ns);
    clocked.gpus[0].sustained_sm_clock_MHz = 1500;
  }
  Op norm;
  norm.kind = OpKind::norm_forward;
  norm.rows = 8192;
  norm.cols = 4096;
  EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), norm),
                   benchmark_kernel_time_ns(clocked.gpus[0], h100(), norm));
}

// A soft-capped loss is compute-bound (a tanh per logit): its time follows the SM clock as a GEMM's (cost/sm_clock.hpp)
// where the profile's clock-probed timings are at its reference clock; the plain loss follows HBM, and a profile whose
// clock-probed kernels stand at no stated clock prices the capped one as timed.
TEST(KernelCost, SoftcappedLossFollowsTheSmClock) {
  Profile clocked = estimates();
  clocked.gpus[0].reference_sm_clock_MHz = 1800;
  clocked.gpus[0].attention_at_reference_clock = true;
  Op loss;
  loss.kind = OpKind::loss_forward;
  loss.rows = 16384;
  loss.cols = 256000;
  const double plain_ns = benchmark_kernel_time_ns(clocked.gpus[0], h100(), loss);
  EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), loss, {1500}), plain_ns);
  EXPECT_EQ(priced_sm_clock_exponent(clocked.gpus[0], loss), 0);
  for (const OpKind kind : {OpKind::loss_forward, OpKind::loss_backward}) {
    loss.kind = kind;
    loss.softcapped_logits = true;
    EXPECT_EQ(sm_clock_exponent(loss), kSoftcappedLossClockExponent);
    const double capped_ns = benchmark_kernel_time_ns(clocked.gpus[0], h100(), loss);
    EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), loss, {1500}), capped_ns * 1800 / 1500);
    clocked.gpus[0].attention_at_reference_clock = false;
    EXPECT_DOUBLE_EQ(training_clock_time_ns(clocked.gpus[0], h100(), loss, {1500}), capped_ns);
    clocked.gpus[0].attention_at_reference_clock = true;
  }
}

TEST(KernelCost, UnfusedAttentionPaysForTheScores) {
  Op op;
  op.kind = OpKind::attention_forward;
  op.attention = {1, 16, 16, 2048, 2048, 128, true, false};
  const double scores = 1.0 * 16 * 2048 * 2048;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 4 * 2 * scores);  // Q K^T writes S, softmax reads and writes, P V reads
  // Each product over every score (the masked half computed too): its FLOPs and its pass.
  const double product_flops = 2.0 * scores * 128;
  const double product_ns = product_flops / (989.4e3 * 0.8 * product_flops / (product_flops + 1.5e9));
  const auto pass_ns = [](double bytes) { return bytes / (3350 * 0.85 * bytes / (bytes + 4 * 1024 * 1024)); };
  const double expected_ns = 2 * (product_ns + pass_ns(2 * scores)) + pass_ns(4 * scores) + 3 * 2000;
  EXPECT_EQ(compute_time_ns(estimates(), h100(), op), std::llround(expected_ns));  // three kernels, three launches
  Op flash = op;
  flash.attention.flash = true;
  EXPECT_LT(compute_time_ns(estimates(), h100(), flash), compute_time_ns(estimates(), h100(), op));
}

TEST(KernelCost, MemoryBoundBytesPerKind) {
  Op op;
  op.rows = 4096;
  op.cols = 1024;
  const double elements = 4096.0 * 1024;
  op.kind = OpKind::norm_forward;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 4 * elements);
  op.kind = OpKind::norm_backward;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 6 * elements);
  op.kind = OpKind::rope_forward;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 4 * elements);
  op.kind = OpKind::activation_forward;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 6 * elements);
  op.activation = Activation::gelu;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 4 * elements);
  op.kind = OpKind::optimizer_step;
  op.elements = 1000;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 30000);  // a bf16 main gradient read twice (AdamW, the norm's pass)
  op.main_gradient_bytes = 4;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 34000);
  op.kind = OpKind::elementwise;
  op.bytes = 12345;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 12345);
  op.kind = OpKind::norm_forward;  // explicit bytes win over the shape rule
  EXPECT_DOUBLE_EQ(memory_bound_bytes(op), 12345);
  // Priced at 0.85 of HBM, saturating with size.
  const double bytes = 12345;
  const double expected = bytes / (3350 * 0.85 * bytes / (bytes + 4 * 1024 * 1024)) + 2000;
  EXPECT_EQ(compute_time_ns(estimates(), h100(), op), std::llround(expected));
}

TEST(KernelCost, MeasuredShapeWins) {
  Profile profile = estimates();
  const Op op = gemm(4096, 4096, 4096);
  EXPECT_EQ(kernel_shape_key(op), "gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0");
  profile.gpus[0].measured[kernel_shape_key(op)] = {200000, 190000, 210000, 50};  // 687 TFLOP/s
  EXPECT_EQ(compute_time_ns(profile, h100(), op), 200000 + 2000);
  EXPECT_NE(compute_time_ns(profile, h100(), gemm(4096, 4096, 2048)), 200000 + 2000);
}

// Issue 44: a preset whose peak the scenario lowers kept its profile's measured times, and MFU went to 60,400%.
TEST(KernelCost, NoPriceBeatsTheStatedPeak) {
  Profile profile = estimates();
  const Op op = gemm(4096, 4096, 4096);  // 137.4 GFLOP
  profile.gpus[0].measured[kernel_shape_key(op)] = {200000, 190000, 210000, 50};
  GpuSpec slow = h100();
  slow.peak_bf16_tflops = 100;
  EXPECT_EQ(compute_time_ns(profile, slow, op), 1374390);  // its FLOPs at 100 TFLOP/s, rounded up
  const Op measured_faster_than_possible = gemm(8192, 8192, 8192);
  profile.gpus[0].measured[kernel_shape_key(measured_faster_than_possible)] = {1000, 1000, 1000, 50};
  EXPECT_EQ(compute_time_ns(profile, h100(), measured_faster_than_possible),
            std::llround(std::ceil(2.0 * 8192 * 8192 * 8192 / (h100().peak_bf16_tflops * 1e3))));
  Op attention;
  attention.kind = OpKind::attention_backward;
  attention.attention = {.batch = 1, .heads = 32, .kv_heads = 32, .seq_q = 4096, .seq_kv = 4096, .head_dim = 128,
                         .causal = true, .flash = true};
  EXPECT_GE(compute_time_ns(profile, slow, attention), 2.5 * 4.0 * 32 * 4096.0 * 4096 * 128 / 2 / (100 * 1e3));
}

TEST(KernelCost, CommunicationIsNotAKernel) {
  Op op;
  op.kind = OpKind::all_reduce;
  op.bytes = 1 << 20;
  EXPECT_THROW(compute_time_ns(estimates(), h100(), op), std::logic_error);
  EXPECT_THROW(memory_bound_bytes(op), std::logic_error);
  EXPECT_THROW(kernel_shape_key(op), std::logic_error);
}

TEST(KernelCost, ShapeKeysDistinguishShapes) {
  Op op;
  op.kind = OpKind::attention_backward;
  op.attention = {1, 32, 8, 4096, 4096, 128, true, true};
  EXPECT_EQ(kernel_shape_key(op), "attention_backward:b=1,h=32,kvh=8,sq=4096,skv=4096,d=128,causal=1,flash=1");
  Op norm;
  norm.kind = OpKind::norm_forward;
  norm.rows = 8;
  norm.cols = 4096;
  EXPECT_EQ(kernel_shape_key(norm), "norm_forward:rows=8,cols=4096");
}

// A chunk of a GEMM split across rotating streams costs its share of the whole GEMM, not the price of a
// GEMM of its rows alone (whose last wave of tiles would idle SMs the next chunk fills).
TEST(KernelCost, SplitGemmChunkCostsItsShareOfTheWholeGemm) {
  const Profile profile = builtin_profile();
  const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  const double launch_ns = profile.kernels_for(gpu).launch_overhead_ns;
  Op chunk = gemm(2048, 2688, 7168);
  chunk.gemm.split = 8;
  const Op whole = gemm(2048 * 8, 2688, 7168);
  const double whole_kernel_ns = double(compute_time_ns(profile, gpu, whole)) - launch_ns;
  EXPECT_NEAR(double(compute_time_ns(profile, gpu, chunk)), whole_kernel_ns / 8 + launch_ns, 1.0);
  // Alone, 2048 x 2688 is 1.3 waves of tiles on 132 SMs: dearer than an eighth of the whole.
  EXPECT_GT(compute_time_ns(profile, gpu, gemm(2048, 2688, 7168)), compute_time_ns(profile, gpu, chunk) * 1.1);
  EXPECT_EQ(kernel_shape_key(chunk), "gemm:m=2048,n=2688,k=7168,count=1,ta=0,tb=0,split=8");
}

// A grouped GEMM over skewed routing (one busy expert, the others at their equal share of the rest) is priced as
// those two GEMMs: a few large and many small products, dearer than the same rows spread evenly. Its key names
// the busiest group; a weight gradient's routed rows are its k.
TEST(KernelCost, SkewedGroupedGemmIsPricedAsItsBusiestAndOtherGroups) {
  const Profile profile = builtin_profile();
  const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  const double launch_ns = profile.kernels_for(gpu).launch_overhead_ns;
  Op even = gemm(1024, 28672, 4096, 8);
  even.gemm_pass = GemmPass::forward;
  even.flops = 2.0 * 1024 * 28672 * 4096 * 8;
  Op skewed = even;
  skewed.gemm.busiest = 4000;  // and 7 groups of ceil((8192 - 4000) / 7) = 599 rows
  const std::vector<Op> parts = gemm_group_parts(skewed);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].gemm.m, 4000);
  EXPECT_EQ(parts[0].gemm.count, 1);
  EXPECT_EQ(parts[1].gemm.m, 599);
  EXPECT_EQ(parts[1].gemm.count, 7);
  EXPECT_EQ(parts[1].gemm.busiest, 0);
  EXPECT_DOUBLE_EQ(parts[1].flops, 2.0 * 599 * 28672 * 4096 * 7);
  // Each part at its own price, its launches included: 8 kernels' launch overheads in all, as the even group's.
  double parts_ns = 0;
  for (const Op& part : parts) parts_ns += double(compute_time_ns(profile, gpu, part));
  EXPECT_NEAR(double(compute_time_ns(profile, gpu, skewed)), parts_ns, 1.0);
  EXPECT_GT(launch_ns, 0);  // so that the launches counted above count
  EXPECT_GT(compute_time_ns(profile, gpu, skewed), compute_time_ns(profile, gpu, even));
  EXPECT_EQ(kernel_shape_key(skewed), "gemm:m=1024,n=28672,k=4096,count=8,ta=0,tb=0,busiest=4000");
  EXPECT_EQ(gemm_group_parts(even).size(), 1u);  // no busiest group: itself
  Op weight_gradient = gemm(4096, 28672, 1024, 8);
  weight_gradient.gemm_pass = GemmPass::weight_gradient;
  weight_gradient.gemm.busiest = 4000;
  const std::vector<Op> wgrad_parts = gemm_group_parts(weight_gradient);
  ASSERT_EQ(wgrad_parts.size(), 2u);
  EXPECT_EQ(wgrad_parts[0].gemm.k, 4000);
  EXPECT_EQ(wgrad_parts[0].gemm.m, 4096);
  EXPECT_EQ(wgrad_parts[1].gemm.k, 599);
}

}  // namespace
}  // namespace twin
