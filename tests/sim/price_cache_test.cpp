// The search's shared price cache: each (GPU, op shape) priced once, whichever thread asks first, and a
// search that uses it gives the same results as simulations without it.
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "sim/price_cache.hpp"
#include "strategies/search.hpp"

namespace twin {
namespace {

TEST(PriceCache, PricesEachGpuAndShapeOnceForEveryThread) {
  sim::PriceCache cache;
  GpuSpec h100, a100;
  Op gemm;
  gemm.kind = OpKind::gemm;
  gemm.gemm = {4096, 4096, 4096};
  Op other = gemm;
  other.gemm.k = 8192;
  std::atomic<int> computed{0};
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(cache.get_or_compute({&h100}, sim::price_key(gemm), [&] { ++computed; return TimeNs{7}; }), 7);
        EXPECT_EQ(cache.get_or_compute({&a100}, sim::price_key(gemm), [&] { ++computed; return TimeNs{9}; }), 9);
        EXPECT_EQ(cache.get_or_compute({&h100}, sim::price_key(other), [&] { ++computed; return TimeNs{11}; }), 11);
      }
    });
  threads.clear();
  // Racing threads may each price a key once before one stores it; never more often than there are threads.
  EXPECT_GE(computed.load(), 3);
  EXPECT_LE(computed.load(), 12);
  // What is placement only (stream, layer, micro-batch) does not make another price.
  // The same GPU and shape at another step clock (sim/step_clock.hpp) is another price.
  EXPECT_EQ(cache.get_or_compute({&h100, 1500}, sim::price_key(gemm), [] { return TimeNs{8}; }), 8);
  EXPECT_EQ(cache.get_or_compute({&h100}, sim::price_key(gemm), [] { return TimeNs{99}; }), 7);
  Op moved = gemm;
  moved.layer = 5;
  moved.micro_batch = 3;
  EXPECT_EQ(sim::price_key(moved), sim::price_key(gemm));
}

TEST(PriceCache, ASearchPricesAsSeparateSimulationsDo) {
  const Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-7b-8xH100.json");
  const Profile profile = load_profile(scenario.profile);
  const std::vector<Candidate> ranked = search(scenario, profile, {}, SearchOptions{2, {}});
  int compared = 0;
  for (const Candidate& c : ranked) {
    if (!c.feasible || compared == 20) continue;
    const Candidate alone = evaluate(scenario, profile, c.strategy, false);  // its own prices only
    EXPECT_EQ(alone.result.iteration_ns, c.result.iteration_ns) << c.key();
    ++compared;
  }
  EXPECT_EQ(compared, 20);
}

// With a sustained-clock curve each candidate's classes price GEMMs at their own step clock: the shared cache must
// keep those prices apart, or a search would price a candidate at another's clock.
TEST(PriceCache, ASearchWithAClockCurvePricesAsSeparateSimulationsDo) {
  const Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-7b-8xH100.json");
  Profile profile = load_profile(scenario.profile);
  for (GpuKernelProfile& kernels : profile.gpus) {  // micro-benchmarks alone: the curve applies
    std::erase_if(kernels.measured, [](const auto& entry) { return !entry.second.source.empty(); });
    index_measured_shapes(kernels);
    kernels.reference_sm_clock_MHz = 1700;
    kernels.sustained_clock.points = {{0.5, 1650, {}, 0}, {0.9, 1450, {}, 0}};
  }
  SearchOptions options;
  options.jobs = 2;
  const std::vector<Candidate> ranked = search(scenario, profile, {}, options);
  int compared = 0;
  for (const Candidate& c : ranked) {
    if (!c.feasible || compared == 10) continue;
    EXPECT_EQ(evaluate(scenario, profile, c.strategy, false).result.iteration_ns, c.result.iteration_ns) << c.key();
    ++compared;
  }
  EXPECT_EQ(compared, 10);
}

}  // namespace
}  // namespace twin

namespace twin::sim {
namespace {

// Every GEMM operand kind is its own key, whatever the op's flags: the weight gradient's block-wise operands, the
// fifth, took a third bit (two held four kinds; a fifth would have keyed as another kind with E5M2 operands).
TEST(PriceCache, EveryGemmInputsKeysApartFromEveryFlag) {
  Op gemm;
  gemm.kind = OpKind::gemm;
  gemm.gemm = {4096, 4096, 4096, 1, false, false};
  gemm.gemm.inputs = GemmInputs::fp8_blockwise_1d;
  std::vector<PriceKey> keys = {price_key(gemm)};
  for (GemmInputs inputs :
       {GemmInputs::bf16, GemmInputs::fp8_per_tensor, GemmInputs::fp8_blockwise, GemmInputs::mxfp8})
    for (bool e5m2 : {false, true})
      for (Fp8Recipe recipe : {Fp8Recipe::delayed, Fp8Recipe::tensorwise, Fp8Recipe::blockwise, Fp8Recipe::mxfp8}) {
        Op other = gemm;  // the field after the inputs: a fifth kind in two bits would read as another recipe
        other.gemm.inputs = inputs;
        other.gemm.e5m2 = e5m2;
        other.fp8_recipe = recipe;
        keys.push_back(price_key(other));
      }
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(keys[i], keys[j]) << i << " " << j;
}

// Every activation is its own key, whatever the op's flags: quick GeGLU, the fifth, took a third bit, which until
// 2026-12-02 spilled into the next field (a quick GeGLU op keyed as a recomputed SwiGLU one).
TEST(PriceCache, EveryActivationKeysApartFromEveryFlag) {
  Op quick;
  quick.kind = OpKind::activation_forward;
  quick.rows = 4096;
  quick.cols = 2880;
  quick.activation = Activation::quick_geglu;
  Op swiglu_recomputed = quick;
  swiglu_recomputed.activation = Activation::swiglu;
  swiglu_recomputed.recomputed = true;
  EXPECT_NE(price_key(quick), price_key(swiglu_recomputed));
  for (Activation a : {Activation::swiglu, Activation::gelu, Activation::squared_relu, Activation::geglu}) {
    Op other = quick;
    other.activation = a;
    EXPECT_NE(price_key(quick), price_key(other)) << to_string(a);
  }
}

}  // namespace
}  // namespace twin::sim
