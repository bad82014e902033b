// An asymmetric plan's gradient reduction across pipelines on four GPUs of one machine (one thread per GPU, each
// with the communicators twin execute makes): every element of every GPU's gradients ends as the sum over the
// pipelines of their copies, exactly (small integers in bf16, scales of 1 and 1/2), whether a stage's replicated
// weights hold identical copies (no SP) or partial sums (SP); and how long each segment's reduction took.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <map>
#include <thread>
#include <vector>

#include "executor/explicit_groups.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/pipeline_reduction_run.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/parameters.hpp"
#include "executor/pipeline_reduction.hpp"
#include "executor/weight_rects.hpp"
#include "gpu/checks.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "tests/executor/asymmetric_fixtures.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::exec {
namespace {

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// Pipeline p's copy of element (row, col) of a weight: a small integer, exact in bf16.
float copy_value(int pipeline, std::size_t name_hash, std::int64_t row, std::int64_t col) {
  return static_cast<float>((static_cast<std::int64_t>(name_hash % 5) + row * 3 + col * 5) % 7 + 1) *
         static_cast<float>(pipeline + 1);
}

std::uint16_t to_bf16(float x) {  // exact for the small integers above
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, 4);
  return static_cast<std::uint16_t>(bits >> 16);
}

void check_reduction(const char* pipelines, bool sequence_parallel) {
  const Scenario scenario = testing::asymmetric_scenario(pipelines, sequence_parallel);
  const PlanGraphs lowered = testing::asymmetric_graphs(scenario);
  const std::vector<PipelineReduction> reductions = plan_pipeline_reduction(lowered);
  const ExplicitGroups groups = explicit_groups(lowered, reductions);
  const int world = lowered.world_size();
  const AsymmetricPlanDetail& plan = *lowered.asymmetric;
  // The expected sum of an element: each pipeline's copy once, a replicated weight's partial sums on a
  // sequence-parallel stage once per holder (each holds its own share; here every share is the copy's value).
  const auto stage_holding = [&](int p, std::int32_t unit) -> const AsymmetricStage& {
    const int model_unit = model_order_unit(scenario.model, unit);
    const std::vector<StageUnits> units = stage_units(scenario.model, plan.pipelines[p]);
    for (std::size_t s = 0; s < units.size(); ++s)
      if (model_unit >= units[s].first_unit && model_unit < units[s].end_unit) return plan.pipelines[p].stages[s];
    throw std::logic_error("no stage holds the unit");
  };
  ncclUniqueId id{};
  TWIN_NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<std::int64_t> mismatches(world, -1), checked(world, 0);
  std::vector<double> reduce_ms(world, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&, rank] {
      TWIN_CUDA_CHECK(cudaSetDevice(rank));
      const PlanPart part = asymmetric_rank_part(lowered, rank);
      const int pipeline = lowered.graph.classes.at(part.class_of_rank[rank]).pipeline;
      Communicators comms(groups, rank, world, id);
      cudaStream_t stream = nullptr;
      TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      StageParameters params(part.scenario, plan_parameter_units(part, rank, 7), stream, false);
      std::map<std::int32_t, std::vector<std::uint16_t>> expected;
      const auto fill = [&] {
        for (ParameterUnit* unit : params.units()) {
          std::vector<std::uint16_t> grads(static_cast<std::size_t>(unit->padded), 0);
          std::vector<std::uint16_t>& sums = expected[unit->id];
          sums.assign(grads.size(), 0);
          for (const WeightTensor& w : unit->tensors) {
            const std::size_t hash = std::hash<std::string>{}(w.name);
            for (const Rect& r : rects_of(w, 0, unit->padded))
              for (std::int64_t row = r.row; row < r.row + r.rows; ++row)
                for (std::int64_t col = r.col; col < r.col + r.cols; ++col) {
                  const std::int64_t at = element_of(r, row, col);
                  grads[at] = to_bf16(copy_value(pipeline, hash, row, col));
                  float sum = 0;
                  for (int p = 0; p < static_cast<int>(plan.pipelines.size()); ++p) {
                    const AsymmetricStage& stage = stage_holding(p, unit->id);
                    const bool partial = w.tp_replicated && sequence_parallel && stage.tensor_model_parallel_size > 1;
                    sum += copy_value(p, hash, row, col) * (partial ? stage.tensor_model_parallel_size : 1);
                  }
                  sums[at] = to_bf16(sum);
                }
          }
          TWIN_CUDA_CHECK(cudaMemcpy(unit->bf16_grads(), grads.data(), grads.size() * 2, cudaMemcpyHostToDevice));
        }
      };
      PipelineReductionRun run(reductions, rank, comms, params, nullptr, stream);
      const int segments = static_cast<int>(gradient_segments(scenario.model, plan.pipelines).size());
      fill();
      for (int segment = 0; segment < segments; ++segment) run.reduce(segment, params, stream);
      TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
      mismatches[rank] = 0;
      for (ParameterUnit* unit : params.units()) {
        std::vector<std::uint16_t> got(static_cast<std::size_t>(unit->padded));
        TWIN_CUDA_CHECK(cudaMemcpy(got.data(), unit->bf16_grads(), got.size() * 2, cudaMemcpyDeviceToHost));
        for (const WeightTensor& w : unit->tensors)
          for (std::int64_t i = w.offset; i < w.offset + w.elements(); ++i) {
            mismatches[rank] += got[i] != expected[unit->id][i];
            ++checked[rank];
          }
      }
      reduce_ms[rank] = test::median_ms([&] {
        for (int segment = 0; segment < segments; ++segment) run.reduce(segment, params, stream);
      }, 3, stream);
      TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_EQ(mismatches[rank], 0) << "rank " << rank << " of " << checked[rank] << " elements";
    EXPECT_GT(checked[rank], 0);
    std::printf("[pipeline reduction] %s rank %d: %lld elements, every segment reduced in %.2f ms\n",
                sequence_parallel ? "sp" : "nosp", rank, static_cast<long long>(checked[rank]), reduce_ms[rank]);
  }
}

TEST(PipelineReductionGpu, EveryGradientEndsAsTheSumOverPipelines) {
  if (gpu_count() < 4) GTEST_SKIP() << "needs 4 CUDA GPUs; found " << gpu_count();
  check_reduction(testing::kTp2BesidePp2, true);
  check_reduction(testing::kTp2BesidePp2, false);
  check_reduction(testing::kTp2ToTp1BesideTp1, true);
}

}  // namespace
}  // namespace twin::exec
