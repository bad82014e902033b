// sim/step_clock.hpp: a class's GEMM duty from its priced ops, the clock the profile's curve gives for it, and the
// replay pricing the class's GEMMs at that clock; an explicit sustained clock wins, and no curve changes nothing.
#include <cmath>

#include <gtest/gtest.h>

#include "sim/flat_graph.hpp"
#include "sim/step_clock.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

// 4000^3: 1.28e11 FLOPs, 128,000 ns at the test GPU's 1000 TFLOP/s (its 96 MB take less at 1000 GB/s); the
// elementwise op 128,000 ns too: duty 0.5.
Op gemm_op() {
  Op op;
  op.kind = OpKind::gemm;
  op.stream = Stream::compute;
  op.gemm = {4000, 4000, 4000, 1};
  op.flops = 1.28e11;
  return op;
}

IterationGraph half_gemm_step(const Op& gemm = gemm_op()) {
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  const OpIndex product = rank_class.add(gemm);
  const OpIndex add = rank_class.add(compute_op(128'000'000));
  Op optimizer = compute_op(1'000'000'000);  // the optimizer step: not part of the passes' duty
  optimizer.phase = Phase::optimizer;
  rank_class.add_dependency(add, rank_class.add(optimizer));
  rank_class.add_dependency(product, add);
  return graph;
}

Profile clocked_profile() {
  Profile profile = test_profile();
  profile.gpus[0].reference_sm_clock_MHz = 1800;
  profile.gpus[0].sustained_clock.points = {{0.4, 1600, {}, 0}, {1.0, 1400, {}, 0}};
  return profile;
}

// The clocked profile with the 4000^3 GEMM traced in a run: `measured_ns` in training against `priced_ns`.
Profile traced_profile(double measured_ns, double priced_ns) {
  Profile traced = clocked_profile();
  Measurement in_training;
  in_training.median_ns = in_training.p10_ns = in_training.p90_ns = measured_ns;
  in_training.samples = 1;
  in_training.source = "trace:run";
  in_training.priced_ns = priced_ns;
  traced.gpus[0].measured[kernel_shape_key(gemm_op())] = in_training;
  index_measured_shapes(traced.gpus[0]);
  return traced;
}

TEST(StepClock, DutyIsTheComputeBoundShareOfTheClassBusyTime) {
  const IterationGraph graph = half_gemm_step();
  EXPECT_DOUBLE_EQ(sim::step_duty(graph.classes[0], test_profile(), test_gpu(), nullptr).duty, 0.5);
  IterationGraph idle;
  add_class(idle, 0);
  EXPECT_DOUBLE_EQ(sim::step_duty(idle.classes[0], test_profile(), test_gpu(), nullptr).duty, 0);
}

TEST(StepClock, TheCurveAtTheDutyUnlessTheProfileStatesAClock) {
  const IterationGraph graph = half_gemm_step();
  Profile profile = clocked_profile();
  // 0.5 lies a sixth of the way from 0.4 (1,600 MHz) to 1.0 (1,400 MHz).
  EXPECT_NEAR(sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).sm_MHz, 1600 - 200.0 / 6, 1e-9);
  EXPECT_EQ(sim::step_clock(graph.classes[0], test_profile(), test_gpu(), nullptr).sm_MHz, 0);  // no curve
  profile.gpus[0].sustained_sm_clock_MHz = 1500;  // folded from a run: wins
  EXPECT_EQ(sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).sm_MHz, 0);
  // A profile with a shape folded from a run gets the step's clock too (compute_time_ns weighs it against the traced
  // ratios): here the traced GEMM is priced at its 256 us, as long as the elementwise op twice, duty 1/3 (below).
  const Profile traced = traced_profile(256'000, 128'000);
  EXPECT_NEAR(sim::step_clock(graph.classes[0], traced, test_gpu(), nullptr).sm_MHz,
              sustained_clock_MHz_at(traced.gpus[0].sustained_clock, 1.0 / 3), 1e-9);
}

// A GEMM that finishes its FLOPs at half the rate of the curve's own load (8192^3 GEMMs: the test GPU's peak) draws
// about half the power per unit of time: its 256 us count as the 128 us the curve's load takes for its FLOPs.
TEST(StepClock, TheDutyCountsComputeBoundTimeAtTheRateOfTheCurvesLoad) {
  const IterationGraph graph = half_gemm_step();
  Profile profile = test_profile();
  Op curve_gemm = gemm_op();  // the curve's load, measured at the peak
  curve_gemm.gemm = {8192, 8192, 8192, 1};
  Measurement at_peak;
  at_peak.median_ns = at_peak.p10_ns = at_peak.p90_ns = 2.0 * 8192 * 8192 * 8192 / 1e6;
  at_peak.samples = 1;
  profile.gpus[0].measured[kernel_shape_key(curve_gemm)] = at_peak;
  Measurement slow = at_peak;
  slow.median_ns = slow.p10_ns = slow.p90_ns = 256'000;
  profile.gpus[0].measured[kernel_shape_key(gemm_op())] = slow;
  index_measured_shapes(profile.gpus[0]);
  EXPECT_EQ(duration_of(profile, gemm_op()), 256'000);
  EXPECT_DOUBLE_EQ(sim::step_duty(graph.classes[0], profile, test_gpu(), nullptr).duty, 128.0 / (256 + 128));
}

// Traced ratios were measured against prices at the profile's own clock, so they hold the training clock: the
// step's clock joins the prior, in full far from every traced shape and by its weight near one. The traced 4000^3
// GEMM ran 1.5x its price; a GEMM one octave from it (k doubled) weighs the two alike, one six octaves away 1/36.
TEST(StepClock, ATracedProfileTakesTheStepsClockWhereNoTracedShapeIsNear) {
  const Profile traced = traced_profile(192'000, 128'000);
  ASSERT_FALSE(traced.gpus[0].trace_shapes.empty());
  const StepClock clock{1500};
  const double slower = 1800 / 1500.0;  // GEMM time at 1,500 MHz against the 1,800 MHz reference
  const auto with_k = [](std::int64_t k) {
    Op op = gemm_op();
    op.gemm.k = k;
    op.flops = 2.0 * 4000 * 4000 * double(k);
    return op;
  };
  const Op near = with_k(8000), far = with_k(4000 * 64);
  const auto priced = [&](const Op& op, StepClock step) { return double(compute_time_ns(traced, test_gpu(), op, step)); };
  const auto at_reference = [&](const Op& op) { return training_clock_time_ns(traced.gpus[0], test_gpu(), op); };
  EXPECT_EQ(priced(gemm_op(), clock), 192'000);  // traced itself: as measured
  EXPECT_NEAR(priced(near, clock), at_reference(near) * std::sqrt(1.5 * slower), 1);
  EXPECT_NEAR(priced(far, clock), at_reference(far) * std::exp((std::log(slower) + std::log(1.5) / 36) / (1 + 1.0 / 36)),
              1);
  EXPECT_NEAR(priced(near, {}), at_reference(near) * std::sqrt(1.5), 1);  // no step clock: the ratios alone
  Profile stated = traced;  // a sustained clock folded from a run wins, as without traced shapes
  stated.gpus[0].sustained_sm_clock_MHz = 1800;
  EXPECT_NEAR(double(compute_time_ns(stated, test_gpu(), far, clock)),
              at_reference(far) * std::exp((std::log(1.5) / 36) / (1 + 1.0 / 36)), 1);
}

// An FP8 4000^3 GEMM (64,000 ns at an FP8 peak of 2000 TFLOP/s), a BF16 one (128,000 ns) and the elementwise op
// (128,000 ns): duty 0.6, a third of it in FP8 GEMMs.
TEST(StepClock, AStepMixingFp8AndBf16GemmsHoldsTheMixOfTheTwoCurves) {
  GpuSpec gpu = test_gpu();
  gpu.peak_fp8_tflops = 2000;
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  Op fp8 = gemm_op();
  fp8.gemm.inputs = GemmInputs::fp8_per_tensor;
  const OpIndex first = rank_class.add(fp8);
  const OpIndex second = rank_class.add(gemm_op());
  rank_class.add_dependency(first, second);
  rank_class.add_dependency(second, rank_class.add(compute_op(128'000'000)));
  const sim::StepDuty duty = sim::step_duty(graph.classes[0], test_profile(), gpu, nullptr);
  EXPECT_DOUBLE_EQ(duty.duty, 0.6);
  EXPECT_DOUBLE_EQ(duty.fp8_share, 1.0 / 3);

  Profile profile = clocked_profile();
  EXPECT_NEAR(sim::step_clock(graph.classes[0], profile, gpu, nullptr).sm_MHz, 1533.3333333333333, 1e-9);  // BF16's
  profile.gpus[0].sustained_clock_fp8.points = {{0.4, 1500, {}, 0, 1450}, {1.0, 1300, {}, 0, 1250}};
  const StepClock clock = sim::step_clock(graph.classes[0], profile, gpu, nullptr);
  // At 0.6 the BF16 probe reads 1,533.3 MHz and the FP8 probe 1,433.3 (the FP8 GEMMs' cycles, 1,383.3, are not
  // priced): the step holds 2/3 x 1,533.3 + 1/3 x 1,433.3 = 1,500, every kernel at it.
  EXPECT_NEAR(clock.sm_MHz, 1500, 1e-9);
  EXPECT_NEAR(training_clock_time_ns(profile.gpus[0], gpu, fp8, clock), 64'000 * 1800 / 1500.0, 1e-6);
  EXPECT_NEAR(training_clock_time_ns(profile.gpus[0], gpu, gemm_op(), clock), 128'000 * 1800 / 1500.0, 1e-6);
}

// A profile's GEMM-rows model moves the curve's clock by the rows carrying most of the class's forward GEMM FLOPs
// (cost/gemm_rows_clock.hpp): here the 4000-row GEMM against a reference of 16,000 rows, a quarter: 4^0.02 higher. A
// step with FP8 GEMMs or with grouped ones keeps its curves' clock (the model was fitted on dense BF16 steps).
TEST(StepClock, AStepOfFewerGemmRowsHoldsAHigherClockByTheProfilesRowsModel) {
  const IterationGraph graph = half_gemm_step();
  Profile profile = clocked_profile();
  const sim::StepDuty duty = sim::step_duty(graph.classes[0], profile, test_gpu(), nullptr);
  EXPECT_EQ(duty.gemm_rows, 4000);
  EXPECT_FALSE(duty.grouped_gemms);
  const double curve = sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).sm_MHz;
  profile.gpus[0].gemm_rows_clock = {0.02, 16'000, "runs"};
  EXPECT_NEAR(sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).sm_MHz, curve * std::pow(4.0, 0.02),
              1e-9);

  GpuSpec gpu = test_gpu();
  gpu.peak_fp8_tflops = 2000;
  Op fp8 = gemm_op();
  fp8.gemm.inputs = GemmInputs::fp8_per_tensor;
  Op grouped = gemm_op();
  grouped.gemm = {1000, 4000, 4000, 4};
  for (const Op& other : {fp8, grouped}) {
    const IterationGraph step = half_gemm_step(other);
    const double own_curve = sim::step_clock(step.classes[0], clocked_profile(), gpu, nullptr).sm_MHz;
    EXPECT_DOUBLE_EQ(sim::step_clock(step.classes[0], profile, gpu, nullptr).sm_MHz, own_curve);
  }
}

// The half-GEMM step under a power model: 1.28e11 FLOPs and 1.28e8 bytes over 128 us of GEMM at 1,800 MHz and
// 128 us of the elementwise op. At 2,000 MHz the GEMM takes 115.2 us of 243.2: 100 W + (1.0 pJ x 1.28e11 + 100 pJ x
// 1.28e8) / 243.2 us = 678.9 W, under a 700 W cap (the maximum clock) and over a 600 W one (the clock in between).
// It prices a profile without a BF16 curve only: where both are measured, the curve prices (sim/step_clock.cpp).
TEST(StepClock, ThePowerModelGivesTheMaximumClockUnderTheCapAndMeetsItAbove) {
  const IterationGraph graph = half_gemm_step();
  Profile profile = clocked_profile();
  profile.gpus[0].power_model = {100, 1.0, 100, 2.0, 2000, 700};
  const double curve_MHz = sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).sm_MHz;
  EXPECT_NEAR(curve_MHz, 1600 - 200.0 / 6, 1e-9);  // the curve at duty 0.5, the power model aside
  const SustainedClockCurve curve = profile.gpus[0].sustained_clock;
  profile.gpus[0].sustained_clock = {};
  const StepWork work = sim::step_work(graph.classes[0], profile, test_gpu(), nullptr);
  EXPECT_DOUBLE_EQ(work.flops, 1.28e11);
  EXPECT_DOUBLE_EQ(work.bytes, 1.28e8);
  EXPECT_NEAR(step_power_W(profile.gpus[0].power_model, work, 2000), 100 + (128 + 12.8) / 0.2432, 1e-6);
  EXPECT_EQ(sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).sm_MHz, 2000);
  profile.gpus[0].power_model.power_cap_W = 600;
  const double clock_MHz = sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).sm_MHz;
  EXPECT_LT(clock_MHz, 2000);
  EXPECT_NEAR(step_power_W(profile.gpus[0].power_model, work, clock_MHz), 600, 0.01);
  // A step with FP8 GEMMs keeps the curves (the power model is fitted on BF16 loads).
  profile.gpus[0].sustained_clock = curve;
  Op fp8 = gemm_op();
  fp8.gemm.inputs = GemmInputs::fp8_per_tensor;
  GpuSpec gpu = test_gpu();
  gpu.peak_fp8_tflops = 2000;
  const IterationGraph fp8_step = half_gemm_step(fp8);
  const double duty = sim::step_duty(fp8_step.classes[0], profile, gpu, nullptr).duty;
  EXPECT_DOUBLE_EQ(sim::step_clock(fp8_step.classes[0], profile, gpu, nullptr).sm_MHz,
                   sustained_clock_MHz_at(profile.gpus[0].sustained_clock, duty));
}

TEST(StepClock, TheReplayPricesTheGemmsAtTheStepClock) {
  const IterationGraph graph = half_gemm_step();
  const Cluster cluster = test_cluster(1);
  const TimeNs rest_ns = 128'000 + 1'000'000;  // the elementwise op and the optimizer step
  EXPECT_EQ(simulate_iteration(graph, cluster, test_profile()).iteration_ns, 128'000 + rest_ns);
  const double clock_MHz = 1600 - 200.0 / 6;
  EXPECT_EQ(simulate_iteration(graph, cluster, clocked_profile()).iteration_ns,
            std::llround(128'000 * 1800 / clock_MHz) + rest_ns);
  Profile folded = clocked_profile();
  folded.gpus[0].sustained_sm_clock_MHz = 1500;
  EXPECT_EQ(simulate_iteration(graph, cluster, folded).iteration_ns, 153'600 + rest_ns);
  // The search's lower bound prices at the same clock, so it stays under the replay.
  EXPECT_LE(sim::compute_busy(graph, cluster, clocked_profile()).at(0).passes.forward_ns,
            simulate_iteration(graph, cluster, clocked_profile()).iteration_ns);
  EXPECT_GT(sim::compute_busy(graph, cluster, clocked_profile()).at(0).passes.forward_ns, 256'000);
}

// Where the curve records the throughput its load's GEMM ran at, GEMMs are priced at the clock that gives the load's
// own micro-benchmark that throughput (the H100 ran its GEMMs 3% slower than their benchmark at duty 0.4 where the
// probe read 7% above the reference clock: docs/ACCURACY.md "GEMMs at the throughput the load measured"); the other
// kernels keep the probe's clock, and a curve without throughputs changes nothing.
TEST(StepClock, GemmsTakeTheThroughputTheCurvesLoadMeasured) {
  const IterationGraph graph = half_gemm_step();
  const Cluster cluster = test_cluster(1);
  Profile profile = clocked_profile();
  Op load = gemm_op();
  load.gemm = {8192, 8192, 8192, 1};
  Measurement at_peak;  // 1000 TFLOP/s at the reference clock, 1,800 MHz
  at_peak.median_ns = at_peak.p10_ns = at_peak.p90_ns = 2.0 * 8192 * 8192 * 8192 / 1e6;
  at_peak.samples = 1;
  profile.gpus[0].measured[kernel_shape_key(load)] = at_peak;
  index_measured_shapes(profile.gpus[0]);
  const StepClock without = sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr);
  EXPECT_EQ(without.gemm_MHz, 0);  // no throughput recorded
  profile.gpus[0].sustained_clock.points[0].gemm_tflops = 900;
  profile.gpus[0].sustained_clock.points[1].gemm_tflops = 800;
  const StepClock with = sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr);
  EXPECT_EQ(with.sm_MHz, without.sm_MHz);
  const double duty = sim::step_duty(graph.classes[0], profile, test_gpu(), nullptr).duty;
  const double loaded_tflops = loaded_gemm_tflops_at(profile.gpus[0].sustained_clock, duty);
  EXPECT_NEAR(loaded_tflops, 900 - 100 * (duty - 0.4) / 0.6, 1e-9);
  const double benchmark_ns = benchmark_kernel_time_ns(profile.gpus[0], test_gpu(), load);
  const double benchmark_tflops = 2.0 * 8192 * 8192 * 8192 / benchmark_ns * 1e-3;
  EXPECT_NEAR(with.gemm_MHz, 1800 * loaded_tflops / benchmark_tflops, 1e-6);
  // The replay: the GEMM's time (launch aside) at the GEMM clock where it was at the probe's.
  const double rest_ns = 128'000 + 1'000'000 + profile.gpus[0].launch_overhead_ns;
  Profile no_throughput = profile;
  no_throughput.gpus[0].sustained_clock.points[0].gemm_tflops = 0;
  const double probe_priced_ns = double(simulate_iteration(graph, cluster, no_throughput).iteration_ns) - rest_ns;
  const double throughput_priced_ns = double(simulate_iteration(graph, cluster, profile).iteration_ns) - rest_ns;
  EXPECT_NEAR(throughput_priced_ns / probe_priced_ns, without.sm_MHz / with.gemm_MHz, 1e-4);
  profile.gpus[0].sustained_clock.points[1].gemm_tflops = 0;  // one point without: the probe's clock for GEMMs too
  EXPECT_EQ(sim::step_clock(graph.classes[0], profile, test_gpu(), nullptr).gemm_MHz, 0);
}

}  // namespace
}  // namespace twin::test
