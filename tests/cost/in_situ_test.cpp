// Shape keys back to ops, interpolation among a kind's measured shapes, and the in-situ ratio that traced
// shapes lend to shapes near them: the formulas on hand-made points.
#include <cmath>

#include <gtest/gtest.h>

#include "cost/in_situ.hpp"
#include "cost/kernel_predictor.hpp"
#include "cost/shape_space.hpp"

namespace twin {
namespace {

Op rows_cols(OpKind kind, std::int64_t rows, std::int64_t cols) {
  Op op;
  op.kind = kind;
  op.rows = rows;
  op.cols = cols;
  return op;
}

TEST(ShapeSpace, EveryComputeKeyComesBackAsItsOp) {
  for (const char* key : {"norm_forward:rows=4096,cols=4096", "activation_backward:rows=8192,cols=11008,gated=1",
                          "optimizer_step:elements=1881214976", "elementwise:bytes=100663296",
                          "attention_backward:b=2,h=32,kvh=8,sq=4096,skv=4096,d=128,causal=1,flash=1",
                          "gemm:m=4096,n=12288,k=4096,count=1,ta=0,tb=1", "moe_permute:bytes=33554432",
                          "gemm:m=4096,n=4096,k=11008,count=1,ta=0,tb=0,residual=1",
                          "norm_backward:rows=4096,cols=4096,residual=1",
                          "activation_forward:rows=4096,cols=14336,gated=1,activation=geglu",
                          "activation_backward:rows=4096,cols=16384,gated=0,activation=squared_relu",
                          "loss_backward:rows=8192,cols=256000,softcap=1"}) {
    const auto op = op_from_kernel_key(key);
    ASSERT_TRUE(op) << key;
    EXPECT_EQ(kernel_shape_key(*op), key);
  }
  EXPECT_EQ(op_from_kernel_key("attention_backward:b=2,h=32,kvh=8,sq=4096,skv=4096,d=128,causal=1,flash=1")->attention.kv_heads, 8);
  EXPECT_EQ(op_from_kernel_key("activation_forward:rows=1,cols=8,gated=1,activation=geglu")->activation,
            Activation::geglu);
  EXPECT_EQ(op_from_kernel_key("activation_forward:rows=1,cols=8,gated=0")->activation, Activation::gelu);
  for (const char* bad : {"norm_forward", "norm_forward:rows=4096", "norm_forward:cols=4096,rows=4096",
                          "norm_forward:rows=-1,cols=4", "norm_forward:rows=4x,cols=4", "all_reduce:bytes=4",
                          "unknown:rows=1,cols=1", "norm_forward:rows=1,cols=1,gated=1",
                          "activation_forward:rows=1,cols=1,gated=1,activation=swiglu",  // SwiGLU keys unnamed
                          "activation_forward:rows=1,cols=1,gated=0,activation=geglu",   // GeGLU is gated
                          "norm_forward:rows=1,cols=1,softcap=1"})
    EXPECT_FALSE(op_from_kernel_key(bad)) << bad;
}

// A flash kernel's tiles are (batch x head) pairs over the sequences: two sequences of 16 heads are one of 32, and
// the key-value groups only share loads (measured on an H200, 2026-11-29: 32 heads with 32 or 8 groups 267 / 266 us
// forward). The head dim picks another tile shape and counts twice.
TEST(ShapeSpace, AttentionIsItsTilesOverTheSequencesAndItsHeadDim) {
  const auto attention = [](std::int64_t batch, std::int64_t heads, std::int64_t groups, std::int64_t seq, std::int64_t dim) {
    Op op;
    op.kind = OpKind::attention_forward;
    op.attention = AttentionShape{batch, heads, groups, seq, seq, dim, true, true};
    return op;
  };
  EXPECT_DOUBLE_EQ(*squared_octave_distance(attention(1, 32, 8, 4096, 128), attention(2, 16, 16, 4096, 128)), 0);
  EXPECT_DOUBLE_EQ(*squared_octave_distance(attention(1, 32, 8, 4096, 128), attention(1, 32, 8, 8192, 128)), 2);
  EXPECT_DOUBLE_EQ(*squared_octave_distance(attention(1, 32, 8, 4096, 128), attention(1, 32, 8, 4096, 64)), 4);
}

TEST(ShapeSpace, DistancesAreOctavesBetweenComparableShapes) {
  const Op a = rows_cols(OpKind::norm_forward, 4096, 4096);
  EXPECT_DOUBLE_EQ(*squared_octave_distance(a, rows_cols(OpKind::norm_forward, 1024, 8192)), 4 + 1);
  EXPECT_FALSE(squared_octave_distance(a, rows_cols(OpKind::norm_backward, 4096, 4096)));
  Op swiglu = rows_cols(OpKind::activation_forward, 4096, 4096), gelu = swiglu;
  gelu.activation = Activation::gelu;
  EXPECT_FALSE(squared_octave_distance(swiglu, gelu));  // another kernel
  Op norm_backward = rows_cols(OpKind::norm_backward, 4096, 4096), adding_skip = norm_backward;
  adding_skip.fuses_residual = true;
  EXPECT_FALSE(squared_octave_distance(norm_backward, adding_skip));  // reads one more tensor
}

TEST(KernelPredictor, InterpolatesTheEfficiencyOfTheKindsOwnShapes) {
  // The model prices 1 ns per 1024 elements; the measured optimizer steps ran 2x that at 2^20 and 2^22.
  auto model = [](const Op& op) { return op.elements / 1024.0; };
  Op small, large, query;
  small.kind = large.kind = query.kind = OpKind::optimizer_step;
  small.elements = 1 << 20;
  large.elements = 1 << 22;
  query.elements = 1 << 21;
  const std::vector<MeasuredKernelShape> measured = {{small, 2 * model(small)}, {large, 2 * model(large)}};
  EXPECT_DOUBLE_EQ(predict_kernel_time_ns(measured, query, model), 2 * model(query));
  EXPECT_DOUBLE_EQ(predict_kernel_time_ns(measured, small, model), 2 * model(small));  // exact: its time
  // Ratios 2 at one octave and 8 at three octaves: weights 1 and 1/9, exp((log 2 + log 8 / 9) / (10/9)).
  const std::vector<MeasuredKernelShape> uneven = {{small, 2 * model(small)}, {large, 8 * model(large)}};
  Op below = query;
  below.elements = 1 << 19;
  EXPECT_NEAR(predict_kernel_time_ns(uneven, below, model),
              model(below) * std::exp((std::log(2.0) + std::log(8.0) / 9) / (10.0 / 9)), 1e-9);
  // No measured shape of the kind: the model.
  const Op norm = rows_cols(OpKind::norm_forward, 4096, 4096);
  EXPECT_DOUBLE_EQ(predict_kernel_time_ns(measured, norm, [](const Op&) { return 7.0; }), 7.0);
}

TEST(InSituRatio, NearTracedShapesLendTheirRatioAndFarOnesFade) {
  const Op traced = rows_cols(OpKind::rope_forward, 4096, 8192);
  const std::vector<TraceShape> shapes = {{traced, std::log(1.2)}};
  EXPECT_DOUBLE_EQ(in_situ_ratio(shapes, traced), 1.2);
  // Half an octave: w = 4 against w_0 = 1, so 4/5 of the log ratio; two octaves: 1/4 against 1, 1/5.
  EXPECT_NEAR(in_situ_ratio(shapes, rows_cols(OpKind::rope_forward, 4096, 11585)),
              std::exp(std::log(1.2) * (1 / std::pow(std::log2(11585.0 / 8192), 2)) /
                       (1 + 1 / std::pow(std::log2(11585.0 / 8192), 2))), 1e-12);
  EXPECT_NEAR(in_situ_ratio(shapes, rows_cols(OpKind::rope_forward, 16384, 8192)), std::exp(std::log(1.2) / 5), 1e-12);
  // Another kind, or none traced: the benchmark price stands.
  EXPECT_EQ(in_situ_ratio(shapes, rows_cols(OpKind::rope_backward, 4096, 8192)), 1.0);
  EXPECT_EQ(in_situ_ratio({}, traced), 1.0);
  // Two traced shapes one octave either side, ratios 0.8 and 1.25: the log ratios cancel.
  const std::vector<TraceShape> pair = {{rows_cols(OpKind::norm_backward, 2048, 4096), std::log(0.8)},
                                        {rows_cols(OpKind::norm_backward, 8192, 4096), std::log(1.25)}};
  EXPECT_NEAR(in_situ_ratio(pair, rows_cols(OpKind::norm_backward, 4096, 4096)), 1.0, 1e-12);
}

TEST(InSituRatio, TraceEntriesNeedAPriceToLendARatio) {
  std::map<std::string, Measurement> measured;
  Measurement benchmark{100, 90, 110, 5, "", 0, 0};
  Measurement traced{120, 110, 130, 4, "trace:run", 100, 100};
  Measurement unpriced{120, 110, 130, 4, "trace:old", 0, 0};  // folded by an older twin: no basis
  measured["norm_forward:rows=4096,cols=4096"] = benchmark;
  measured["norm_forward:rows=8192,cols=4096"] = traced;
  measured["norm_forward:rows=16384,cols=4096"] = unpriced;
  GpuKernelProfile profile;
  profile.measured = measured;
  const std::vector<TraceShape> shapes = index_trace_shapes(profile);
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_FALSE(shapes[0].clock_free);  // a memory-bound kind follows no SM clock
  EXPECT_DOUBLE_EQ(shapes[0].log_ratio, std::log(1.2));
  // Interpolation keeps the benchmark basis: the traced entry counts with the benchmark it replaced.
  const std::vector<MeasuredKernelShape> kernels = index_measured_kernels(measured);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(kernels[1].time_ns, 100);
}

// A GEMM a run traced at 1,500 MHz, priced at the profile's 1,800 MHz reference: 1.2 x its price is the clock's
// (1800 / 1500) and 1.0 the rest. Stating the run's clock, its ratio leaves the clock out, and a step at 1,600 MHz
// near it is priced at its own clock; an entry without the clock lends its ratio, clock and all, as before.
TEST(InSituRatio, ATracedRatioWithoutItsRunsClockTakesTheStepsClock) {
  GpuKernelProfile profile;
  profile.reference_sm_clock_MHz = 1800;
  const std::string key = "gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0";
  Measurement traced{1200, 1190, 1210, 4, "trace:run", 1000, 1000};
  traced.run_sm_clock_MHz = 1500;
  profile.measured[key] = traced;
  std::vector<TraceShape> shapes = index_trace_shapes(profile);
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_TRUE(shapes[0].clock_free);
  EXPECT_NEAR(shapes[0].log_ratio, 0.0, 1e-12);
  const Op gemm = *op_from_kernel_key(key);
  const double step_clock_ratio = 1800.0 / 1600.0;
  EXPECT_NEAR(in_situ_ratio(shapes, gemm, step_clock_ratio, step_clock_ratio), step_clock_ratio, 1e-12);
  profile.measured[key].run_sm_clock_MHz = 0;
  shapes = index_trace_shapes(profile);
  EXPECT_FALSE(shapes[0].clock_free);
  EXPECT_NEAR(in_situ_ratio(shapes, gemm, step_clock_ratio, step_clock_ratio), 1.2, 1e-12);
}

}  // namespace
}  // namespace twin
