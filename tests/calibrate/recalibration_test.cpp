// Recalibration arithmetic on the recorded H200 run 7b4l-mbs1-h200 (tests/traces/fixtures/executed):
// the join of ops.csv rows to the plan's ops, exact entries and corrections computed by hand from the
// fixture's numbers, the corrections' use in pricing and their profile format.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "cost/collective_tables.hpp"
#include "calibrate/recalibration.hpp"
#include "core/error.hpp"
#include "reports/best_plan.hpp"
#include "strategies/lowering.hpp"
#include "traces/recalibration_run.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;
const fs::path kRun = fs::path(TWIN_SOURCE_DIR) / "tests/traces/fixtures/executed/7b4l-mbs1-h200";
// The shipped h200-x4 of 2026-11-23, whose numbers the expectations below were computed from.
const fs::path kProfile = fs::path(TWIN_SOURCE_DIR) / "tests/traces/fixtures/executed/h200-x4-2026-11-23.json";

struct Fixture {
  Plan plan = read_plan(kRun / "best.json");
  Profile profile = load_profile(kProfile.string());
  IterationGraph graph = lower_to_op_graphs(plan.scenario, plan.strategy);
  RunMeasurements run = read_run_measurements(kRun / "ops.csv", graph, plan.scenario.cluster, profile, "trace:7b4l");
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

const MeasuredOpSample& sample_of(const RunMeasurements& run, OpIndex index) {
  auto it = std::find_if(run.samples.begin(), run.samples.end(), [&](const MeasuredOpSample& s) { return s.index == index; });
  EXPECT_NE(it, run.samples.end());
  return *it;
}

TEST(RecalibrationJoin, EveryMeasuredRowGetsItsOpBack) {
  const RunMeasurements& run = fixture().run;
  // 114 ops, one (L3.mlp_residual.bwd) ran no kernel: the last layer's residual gradient passes through.
  EXPECT_EQ(run.samples.size(), 113u);
  EXPECT_EQ(run.absent_ops, 1);
  EXPECT_EQ(run.point_to_point_ops, 0);
  const MeasuredOpSample& qkv = sample_of(run, 2);  // ops.csv line 4: L0.qkv_projection.fwd.mb0, 532893 ns
  EXPECT_EQ(qkv.op.kind, OpKind::gemm);
  EXPECT_EQ(qkv.op.gemm.m, 4096);
  EXPECT_EQ(qkv.op.gemm.n, 12288);  // 3 x 4096: q, k, v of 32 heads
  EXPECT_EQ(qkv.op.gemm.k, 4096);
  EXPECT_EQ(qkv.measured_ns, 532893);
  EXPECT_EQ(qkv.gpu.name, "H200-141GB");
  EXPECT_EQ(sample_of(run, 113).op.kind, OpKind::optimizer_step);
  EXPECT_EQ(sample_of(run, 113).measured_ns, 12132542);
}

TEST(RecalibrationArithmetic, ExactShapesTakeTheMedianOverOps) {
  const Recalibration result = recalibrate(fixture().profile, fixture().run);
  const GpuKernelProfile& kernels = result.profile.gpus.at(0);
  // rope_forward rows=4096, cols=8192 (q and k of 32 heads x 128): the 4 layers measured 138367, 137152,
  // 136735, 134655 ns. Sorted, the median is (136735 + 137152) / 2; p10 at position 0.3, p90 at 2.7.
  const Measurement& rope = kernels.measured.at("rope_forward:rows=4096,cols=8192");
  EXPECT_DOUBLE_EQ(rope.median_ns, 136943.5);
  EXPECT_DOUBLE_EQ(rope.p10_ns, 134655 + 0.3 * (136735 - 134655));
  EXPECT_DOUBLE_EQ(rope.p90_ns, 137152 + 0.7 * (138367 - 137152));
  EXPECT_EQ(rope.samples, 4);
  EXPECT_EQ(rope.source, "trace:7b4l");
  // One optimizer step: its time as measured, replacing nothing (1.07e9 elements were never benchmarked).
  EXPECT_FALSE(fixture().profile.gpus[0].measured.count("optimizer_step:elements=1071681536"));
  EXPECT_DOUBLE_EQ(kernels.measured.at("optimizer_step:elements=1071681536").median_ns, 12132542);
  // The micro-benchmark of embedding_forward 4096 x 4096 (35745 ns in h200-x4) is replaced by the run's 30080 ns.
  EXPECT_DOUBLE_EQ(fixture().profile.gpus[0].measured.at("embedding_forward:rows=4096,cols=4096").median_ns, 35745);
  EXPECT_DOUBLE_EQ(kernels.measured.at("embedding_forward:rows=4096,cols=4096").median_ns, 30080);
  // Pricing now gives the measured time plus the profile's 2 us launch overhead.
  EXPECT_EQ(compute_time_ns(result.profile, sample_of(fixture().run, 113).gpu, sample_of(fixture().run, 113).op),
            12132542 + 2000);
  EXPECT_FALSE(result.profile.builtin);
}

TEST(RecalibrationArithmetic, TracedShapesKeepTheirPriceAndLendTheirRatioToShapesNearThem) {
  const Recalibration result = recalibrate(fixture().profile, fixture().run);
  const GpuKernelProfile& before = fixture().profile.gpus[0];
  const GpuKernelProfile& kernels = result.profile.gpus.at(0);
  // rope_forward rows=4096, cols=8192: the entry remembers what the profile priced it at.
  const MeasuredOpSample& rope_op = sample_of(fixture().run, 3);
  ASSERT_EQ(rope_op.op.kind, OpKind::rope_forward);
  const Measurement& rope = kernels.measured.at("rope_forward:rows=4096,cols=8192");
  EXPECT_DOUBLE_EQ(rope.priced_ns, benchmark_kernel_time_ns(before, rope_op.gpu, rope_op.op));
  const double ratio = rope.median_ns / rope.priced_ns;
  // The run's only rope_forward shape. A shape one octave away (rows 2048) weighs it like the benchmark
  // price itself (w = 1 against w_0 = 1): half its log ratio, sqrt(ratio).
  Op near = rope_op.op;
  near.rows = 2048;
  const double near_priced = benchmark_kernel_time_ns(before, rope_op.gpu, near);
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(kernels, rope_op.gpu, near), near_priced);  // the basis stays
  EXPECT_EQ(compute_time_ns(result.profile, rope_op.gpu, near), std::llround(near_priced * std::sqrt(ratio) + 2000));
  EXPECT_EQ(compute_time_ns(fixture().profile, rope_op.gpu, near), std::llround(near_priced + 2000));
  // Four octaves away (cols x 16): w = 1/16 against 1, a sixteenth of a seventeenth... of the log ratio.
  Op far = rope_op.op;
  far.cols = 8192 * 16;
  const double far_priced = benchmark_kernel_time_ns(before, rope_op.gpu, far);
  EXPECT_EQ(compute_time_ns(result.profile, rope_op.gpu, far),
            std::llround(far_priced * std::exp(std::log(ratio) / 17) + 2000));
  // The embedding_forward shape the run measured keeps the micro-benchmark it replaced (35745 ns) as basis.
  const Measurement& embedding = kernels.measured.at("embedding_forward:rows=4096,cols=4096");
  EXPECT_EQ(embedding.source, "trace:7b4l");
  EXPECT_DOUBLE_EQ(embedding.benchmark_ns, 35745);
  EXPECT_DOUBLE_EQ(embedding.priced_ns, 35745);
  // Compute kinds get no correction factor any more: the traced shapes are the correction.
  EXPECT_TRUE(kernels.corrections.empty());
}

TEST(RecalibrationArithmetic, FoldingTheSameRunAgainReplacesItsEntries) {
  const Recalibration once = recalibrate(fixture().profile, fixture().run);
  const Recalibration twice = recalibrate(once.profile, fixture().run);
  // The same entries, each priced on the basis of the first fold (the price before any trace).
  EXPECT_EQ(to_json(twice.profile)["gpus"][0]["measured"], to_json(once.profile)["gpus"][0]["measured"]);
  EXPECT_EQ(twice.profile.provenance["recalibrated_from"], nlohmann::json::array({"trace:7b4l"}));
  const MeasuredOpSample& rope_op = sample_of(fixture().run, 3);
  Op near = rope_op.op;
  near.rows = 2048;
  EXPECT_EQ(compute_time_ns(twice.profile, rope_op.gpu, near), compute_time_ns(once.profile, rope_op.gpu, near));
}

// Collectives of a synthetic run: three 2-GPU all-reduces of a placement h200-x4 has a table of, and one
// over 8 GPUs (no table) that measured 1.5 x its model.
RunMeasurements collective_run() {
  const GpuSpec gpu = sample_of(fixture().run, 2).gpu;
  RunMeasurements run;
  run.run = "trace:synthetic";
  MeasuredOpSample tabled;  // a 2-GPU all-reduce: h200-x4 has the table of that placement
  tabled.op.kind = OpKind::all_reduce;
  tabled.op.bytes = 3 << 20;
  tabled.gpu = gpu;
  tabled.span = {2, 2, 1};
  for (TimeNs t : {30000, 31000, 36000}) {
    tabled.measured_ns = t;
    run.samples.push_back(tabled);
  }
  MeasuredOpSample untabled = tabled;  // 8 GPUs: no table, so it feeds the all_reduce correction
  untabled.span = {8, 8, 1};
  untabled.measured_ns = 90000;
  untabled.model_ns = 60000;
  run.samples.push_back(untabled);
  return run;
}

// The 7B run with the synthetic collectives: exact entries and a correction in one profile.
const Profile& recalibrated_with_both() {
  static const Profile both = [] {
    RunMeasurements run = fixture().run;
    for (const MeasuredOpSample& s : collective_run().samples) run.samples.push_back(s);
    return recalibrate(fixture().profile, run).profile;
  }();
  return both;
}

TEST(RecalibrationArithmetic, CollectivesUpdateTheirTableOrFeedTheCorrection) {
  const GpuSpec gpu = sample_of(fixture().run, 2).gpu;
  const Recalibration result = recalibrate(fixture().profile, collective_run());
  const CollectiveTable* table = find_collective_table(result.profile.collectives, gpu.name, OpKind::all_reduce, 2, 2, 1);
  ASSERT_NE(table, nullptr);
  auto row = std::find_if(table->points.begin(), table->points.end(),
                          [](const CollectivePoint& p) { return p.size_bytes == (3 << 20); });
  ASSERT_NE(row, table->points.end());
  EXPECT_DOUBLE_EQ(row->time_us, 31.0);                       // the median of 30, 31, 36 us
  EXPECT_DOUBLE_EQ(row->algbw_GBps, (3 << 20) / 31e3);        // S / t
  EXPECT_DOUBLE_EQ(row->busbw_GBps, row->algbw_GBps * 2 * 1 / 2);  // all-reduce: 2 (n - 1) / n
  EXPECT_TRUE(std::is_sorted(table->points.begin(), table->points.end(),
                             [](const CollectivePoint& a, const CollectivePoint& b) { return a.size_bytes < b.size_bytes; }));
  EXPECT_DOUBLE_EQ(result.profile.gpus[0].corrections.at("all_reduce").factor, 1.5);
  EXPECT_EQ(result.profile.gpus[0].corrections.at("all_reduce").runs[0].ops, 1);
}

TEST(RecalibrationFormat, CorrectionsAndSourcesRoundTripAndOldProfilesStayByteIdentical) {
  const nlohmann::json written = to_json(recalibrated_with_both());
  const Profile read = profile_from_json(written, "p.json");
  EXPECT_EQ(to_json(read), written);
  EXPECT_EQ(read.gpus[0].measured.at("rope_forward:rows=4096,cols=8192").source, "trace:7b4l");
  EXPECT_GT(read.gpus[0].measured.at("rope_forward:rows=4096,cols=8192").priced_ns, 0);
  EXPECT_FALSE(read.gpus[0].trace_shapes.empty());
  EXPECT_EQ(written["gpus"][0]["corrections"]["version"], kCorrectionsVersion);
  // A profile never recalibrated writes neither field.
  const nlohmann::json original = to_json(fixture().profile);
  EXPECT_FALSE(original["gpus"][0].contains("corrections"));
  EXPECT_EQ(original.dump().find("\"source\""), std::string::npos);
}

void expect_input_error(nlohmann::json document, const std::string& pointer, const nlohmann::json& value,
                        const std::string& path_in_error) {
  document[nlohmann::json::json_pointer(pointer)] = value;
  try {
    profile_from_json(document, "p.json");
    FAIL() << pointer << " = " << value.dump() << " was accepted";
  } catch (const InputError& error) {
    EXPECT_EQ(error.json_path(), path_in_error) << error.what();
  }
}

TEST(RecalibrationFormat, BadCorrectionsAreInputErrorsNamingTheirPath) {
  const nlohmann::json written = to_json(recalibrated_with_both());
  expect_input_error(written, "/gpus/0/corrections/kinds/all_reduce/factor", -1.0,
                     "/gpus/0/corrections/kinds/all_reduce/factor");
  expect_input_error(written, "/gpus/0/corrections/kinds/all_reduce/factor", "fast",
                     "/gpus/0/corrections/kinds/all_reduce/factor");
  expect_input_error(written, "/gpus/0/corrections/version", 2, "/gpus/0/corrections/version");
  expect_input_error(written, "/gpus/0/measured/gemm:m=1024,n=1024,k=1024,count=1,ta=0,tb=0/benchmark_ns", 5,
                     "/gpus/0/measured/gemm:m=1024,n=1024,k=1024,count=1,ta=0,tb=0/benchmark_ns");
  expect_input_error(written, "/gpus/0/measured/rope_forward:rows=4096,cols=8192/priced_ns", -1,
                     "/gpus/0/measured/rope_forward:rows=4096,cols=8192/priced_ns");
  expect_input_error(written, "/gpus/0/corrections/kinds/send", written["gpus"][0]["corrections"]["kinds"]["all_reduce"],
                     "/gpus/0/corrections/kinds/send");
  expect_input_error(written, "/gpus/0/corrections/kinds/all_reduce/runs/0/model_ns", 0,
                     "/gpus/0/corrections/kinds/all_reduce/runs/0/model_ns");
  expect_input_error(written, "/gpus/0/measured/gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0/source", 7,
                     "/gpus/0/measured/gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0/source");
}

// Rule 4: a run's routing joins the runs of its (experts, top-k); folding a run again replaces its entry,
// and the profile's figure is the runs' mean weighted by their samples.
TEST(RecalibrationArithmetic, RoutingOfMoeRunsIsTheirSampleWeightedMean) {
  RunMeasurements run = fixture().run;
  run.routing = MoeRouting{8, 2, {{"trace:a", 32, 2048, 1.5}}};
  const Recalibration first = recalibrate(fixture().profile, run);
  ASSERT_NE(first.profile.routing_for(8, 2), nullptr);
  EXPECT_EQ(first.profile.routing_for(8, 1), nullptr);
  EXPECT_DOUBLE_EQ(first.profile.routing_for(8, 2)->routing_imbalance(), 1.5);
  const ProfileChange& change = first.changes.back();
  EXPECT_EQ(change.entry, "/moe_routing/experts=8,top_k=2");
  EXPECT_TRUE(change.old_value.is_null());
  EXPECT_EQ(change.samples, 32);

  run.routing = MoeRouting{8, 2, {{"trace:b", 96, 2048, 1.1}}};
  const Recalibration second = recalibrate(first.profile, run);
  EXPECT_DOUBLE_EQ(second.profile.routing_for(8, 2)->routing_imbalance(), (32 * 1.5 + 96 * 1.1) / 128);
  EXPECT_DOUBLE_EQ(second.changes.back().old_value.get<double>(), 1.5);
  run.routing = MoeRouting{8, 2, {{"trace:a", 32, 2048, 1.3}}};  // run a again, measured anew
  const Recalibration again = recalibrate(second.profile, run);
  EXPECT_EQ(again.profile.routing_for(8, 2)->runs.size(), 2u);
  EXPECT_DOUBLE_EQ(again.profile.routing_for(8, 2)->routing_imbalance(), (32 * 1.3 + 96 * 1.1) / 128);

  // The profile file carries it; a figure that is not the runs' mean is refused.
  const nlohmann::json written = to_json(again.profile);
  EXPECT_EQ(to_json(profile_from_json(written, "p.json")), written);
  expect_input_error(written, "/moe_routing/0/routing_imbalance", 1.9, "/moe_routing/0/routing_imbalance");
  expect_input_error(written, "/moe_routing/0/runs/0/imbalance_mean", 0.5, "/moe_routing/0/runs/0/imbalance_mean");
  expect_input_error(written, "/moe_routing/0/top_k", 9, "/moe_routing/0/top_k");
}

TEST(RecalibrationArithmetic, TheRunsClockBecomesTheSustainedClockAndTheBasisOfEveryGemm) {
  RunMeasurements run = fixture().run;
  run.sm_clock_MHz = 1450;  // the fixture profile's GEMMs are at its reference, 1611.9 MHz
  const Recalibration result = recalibrate(fixture().profile, run);
  const GpuKernelProfile& before = fixture().profile.gpus[0];
  const GpuKernelProfile& kernels = result.profile.gpus.at(0);
  EXPECT_DOUBLE_EQ(kernels.sustained_sm_clock_MHz, 1450);
  ASSERT_FALSE(result.changes.empty());
  EXPECT_EQ(result.changes.front().entry, "/gpus/0/sustained_sm_clock_MHz");
  EXPECT_TRUE(result.changes.front().old_value.is_null());
  const double slower = before.reference_sm_clock_MHz / 1450;
  // A GEMM the run measured keeps its time; its ratio is taken against its price at the run's clock.
  const MeasuredOpSample& qkv = sample_of(run, 2);
  const Measurement& traced = kernels.measured.at(kernel_shape_key(qkv.op));
  const Recalibration unclocked = recalibrate(fixture().profile, fixture().run);
  EXPECT_DOUBLE_EQ(traced.median_ns, unclocked.profile.gpus.at(0).measured.at(kernel_shape_key(qkv.op)).median_ns);
  EXPECT_NEAR(traced.priced_ns, benchmark_kernel_time_ns(before, qkv.gpu, qkv.op) * slower, 1e-6 * traced.priced_ns);
  // A GEMM far from every traced shape (another model's width) moves by the clock alone.
  Op far = qkv.op;
  far.gemm.m = 65536;
  far.gemm.n = 49152;
  far.flops = 2.0 * far.gemm.m * far.gemm.n * far.gemm.k;
  EXPECT_NEAR(training_clock_time_ns(kernels, qkv.gpu, far), benchmark_kernel_time_ns(kernels, qkv.gpu, far) * slower, 1e-3);
  // Other kinds carry no clock: rope's basis is its benchmark, as without a clock.
  const MeasuredOpSample& rope_op = sample_of(run, 3);
  EXPECT_DOUBLE_EQ(kernels.measured.at("rope_forward:rows=4096,cols=8192").priced_ns,
                   benchmark_kernel_time_ns(before, rope_op.gpu, rope_op.op));
  // Without a recorded clock nothing of this happens.
  EXPECT_DOUBLE_EQ(unclocked.profile.gpus.at(0).sustained_sm_clock_MHz, 0);
}

// A profile with a sustained-clock curve keeps pricing each step at the clock its own duty gives: the curve stays as
// measured, no one clock is stated for every step, and the curve's clock for the run's plan goes into its shapes'
// entries, whose ratios are then taken without it (cost/in_situ.hpp).
TEST(RecalibrationArithmetic, WithACurveItsClockForThePlanGoesIntoTheRunsShapesAndTheCurveStays) {
  Profile profile = fixture().profile;
  GpuKernelProfile& gpu = profile.gpus[0];
  gpu.sustained_clock.points = {{0.4, 1700, {1690, 1710}, 0}, {1.0, 1500, {1490, 1510}, 0}};
  gpu.sustained_clock_fp8.points = {{1.0, 1400, {}, 0}};
  RunMeasurements run = fixture().run;
  run.sm_clock_MHz = 1560;
  run.predicted_sm_clock_MHz = 1500;
  const Recalibration result = recalibrate(profile, run);
  const GpuKernelProfile& kernels = result.profile.gpus.at(0);
  EXPECT_DOUBLE_EQ(kernels.sustained_sm_clock_MHz, 0);
  EXPECT_EQ(sustained_clock_json(kernels.sustained_clock), sustained_clock_json(gpu.sustained_clock));
  EXPECT_EQ(sustained_clock_json(kernels.sustained_clock_fp8), sustained_clock_json(gpu.sustained_clock_fp8));
  for (const ProfileChange& change : result.changes) EXPECT_EQ(change.entry.find("clock"), std::string::npos) << change.entry;
  // The entries state the clock the curve gave the plan, the scale every step is priced on, not the run's NVML clock
  // (on an H100 at its cap NVML reads 8-9% below the probe); the run's offset from it stays in their ratios.
  const auto traced_clocks = [](const GpuKernelProfile& folded) {
    std::set<double> clocks;
    for (const auto& [key, m] : folded.measured)
      if (!m.source.empty()) clocks.insert(m.run_sm_clock_MHz);
    return clocks;
  };
  EXPECT_EQ(traced_clocks(kernels), std::set<double>{1500});
  // A run whose clock was not recorded states none: its ratios hold it.
  RunMeasurements unclocked = run;
  unclocked.sm_clock_MHz = 0;
  EXPECT_EQ(traced_clocks(recalibrate(profile, unclocked).profile.gpus.at(0)), std::set<double>{0});
  // Without a predicted clock (the plan got none from the curve) the run's clock is stated, as before, and the
  // entries' ratios hold it.
  run.predicted_sm_clock_MHz = 0;
  const Recalibration stated = recalibrate(profile, run);
  EXPECT_DOUBLE_EQ(stated.profile.gpus.at(0).sustained_sm_clock_MHz, 1560);
  for (const auto& [key, m] : stated.profile.gpus.at(0).measured) EXPECT_DOUBLE_EQ(m.run_sm_clock_MHz, 0) << key;
}

TEST(RecalibrationArithmetic, ARunWithNothingMeasuredIsRefused) {
  RunMeasurements empty;
  empty.run = "trace:empty";
  EXPECT_THROW(recalibrate(fixture().profile, empty), std::invalid_argument);
}

}  // namespace
}  // namespace twin
