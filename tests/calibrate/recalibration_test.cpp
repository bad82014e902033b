// Recalibration arithmetic on the recorded H200 run 7b4l-mbs1-h200 (tests/traces/fixtures/executed):
// the join of ops.csv rows to the plan's ops, exact entries and corrections computed by hand from the
// fixture's numbers, the corrections' use in pricing and their profile format.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "calibrate/collective_tables.hpp"
#include "calibrate/recalibration.hpp"
#include "core/error.hpp"
#include "reports/best_plan.hpp"
#include "strategies/lowering.hpp"
#include "traces/recalibration_run.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;
const fs::path kRun = fs::path(TWIN_SOURCE_DIR) / "tests/traces/fixtures/executed/7b4l-mbs1-h200";

struct Fixture {
  Plan plan = read_plan(kRun / "best.json");
  Profile profile = load_profile("h200-x4");
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
  // The micro-benchmark of embedding_forward 4096 x 4096 (36992 ns) is replaced by the run's 30080 ns.
  EXPECT_DOUBLE_EQ(fixture().profile.gpus[0].measured.at("embedding_forward:rows=4096,cols=4096").median_ns, 36992);
  EXPECT_DOUBLE_EQ(kernels.measured.at("embedding_forward:rows=4096,cols=4096").median_ns, 30080);
  // Pricing now gives the measured time plus the profile's 2 us launch overhead.
  EXPECT_EQ(compute_time_ns(result.profile, sample_of(fixture().run, 113).gpu, sample_of(fixture().run, 113).op),
            12132542 + 2000);
  EXPECT_FALSE(result.profile.builtin);
}

TEST(RecalibrationArithmetic, CorrectionIsMeasuredOverModelSummedOverTheKind) {
  const Recalibration result = recalibrate(fixture().profile, fixture().run);
  const GpuKernelProfile& kernels = result.profile.gpus.at(0);
  // rope_forward: the 4 ops measured 546909 ns in all (metrics.json's kernel_span agrees); the model
  // priced each 81336 ns with the 2000 ns launch overhead (best.json), so 4 x 79336 ns of kernel.
  const KindCorrection& rope = kernels.corrections.at("rope_forward");
  ASSERT_EQ(rope.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(rope.runs[0].measured_ns, 546909);
  EXPECT_NEAR(rope.runs[0].model_ns, 4 * 79336.0, 4 * 0.5);
  EXPECT_DOUBLE_EQ(rope.factor, rope.runs[0].measured_ns / rope.runs[0].model_ns);
  EXPECT_NEAR(rope.factor, 546909 / (4 * 79336.0), 3e-5);  // 1.7234: the run's rope ran 72% over the model
  EXPECT_EQ(rope.runs[0].ops, 4);
  // gemm: 51 ops measured 29918237 ns (metrics.json); their model leaves each shape's own entry out.
  EXPECT_DOUBLE_EQ(kernels.corrections.at("gemm").runs[0].measured_ns, 29918237);
  EXPECT_EQ(kernels.corrections.at("gemm").runs[0].ops, 51);
  // A rope shape the run did not measure is priced by the model times the factor.
  Op unseen = sample_of(fixture().run, 3).op;
  unseen.rows = 2048;
  const GpuSpec& gpu = sample_of(fixture().run, 3).gpu;
  const double model_ns = model_kernel_time_ns(fixture().profile.gpus[0], gpu, unseen);
  EXPECT_EQ(compute_time_ns(result.profile, gpu, unseen), std::llround(model_ns * rope.factor + 2000));
  EXPECT_EQ(compute_time_ns(fixture().profile, gpu, unseen), std::llround(model_ns + 2000));
}

TEST(RecalibrationArithmetic, FoldingTheSameRunAgainReplacesItsEntries) {
  const Recalibration once = recalibrate(fixture().profile, fixture().run);
  const Recalibration twice = recalibrate(once.profile, fixture().run);
  // One entry per run in every correction. Curves do not depend on exact entries, so every kind but the
  // GEMMs keeps its factor exactly; GEMMs are interpolated among measured GEMMs, which now include the
  // run's other shapes, so their model (and factor) moves a little.
  for (const auto& [kind, correction] : twice.profile.gpus[0].corrections) {
    ASSERT_EQ(correction.runs.size(), 1u) << kind;
    const double first = once.profile.gpus[0].corrections.at(kind).factor;
    if (kind == "gemm") EXPECT_NEAR(correction.factor, first, 0.05 * first);
    else EXPECT_DOUBLE_EQ(correction.factor, first) << kind;
  }
  EXPECT_EQ(to_json(twice.profile)["gpus"][0]["measured"], to_json(once.profile)["gpus"][0]["measured"]);
  EXPECT_EQ(twice.profile.provenance["recalibrated_from"], nlohmann::json::array({"trace:7b4l"}));
}

TEST(RecalibrationArithmetic, CollectivesUpdateTheirTableOrFeedTheCorrection) {
  const Profile& profile = fixture().profile;
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
  const Recalibration result = recalibrate(profile, run);
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
  const Recalibration result = recalibrate(fixture().profile, fixture().run);
  const nlohmann::json written = to_json(result.profile);
  const Profile read = profile_from_json(written, "p.json");
  EXPECT_EQ(to_json(read), written);
  EXPECT_EQ(read.gpus[0].measured.at("rope_forward:rows=4096,cols=8192").source, "trace:7b4l");
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
  const nlohmann::json written = to_json(recalibrate(fixture().profile, fixture().run).profile);
  expect_input_error(written, "/gpus/0/corrections/kinds/gemm/factor", -1.0, "/gpus/0/corrections/kinds/gemm/factor");
  expect_input_error(written, "/gpus/0/corrections/kinds/gemm/factor", "fast", "/gpus/0/corrections/kinds/gemm/factor");
  expect_input_error(written, "/gpus/0/corrections/version", 2, "/gpus/0/corrections/version");
  expect_input_error(written, "/gpus/0/corrections/kinds/send", written["gpus"][0]["corrections"]["kinds"]["gemm"],
                     "/gpus/0/corrections/kinds/send");
  expect_input_error(written, "/gpus/0/corrections/kinds/gemm/runs/0/model_ns", 0, "/gpus/0/corrections/kinds/gemm/runs/0/model_ns");
  expect_input_error(written, "/gpus/0/measured/gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0/source", 7,
                     "/gpus/0/measured/gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0/source");
}

TEST(RecalibrationArithmetic, ARunWithNothingMeasuredIsRefused) {
  RunMeasurements empty;
  empty.run = "trace:empty";
  EXPECT_THROW(recalibrate(fixture().profile, empty), std::invalid_argument);
}

}  // namespace
}  // namespace twin
