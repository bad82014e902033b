// Hot switching's switch into a layout that pads the vocabulary further, on two GPUs (executor/gpu/resharding_run.hpp):
// a vocabulary of 1,900 pads to 1,920 at TP 1 and to 2,048 at TP 2 (Megatron: a multiple of 128 x TP). From TP 1 x DP 2
// into TP 2, every element of the model arrives as the layout after initialises it (each element is initialised by
// its index in the full weight, so both layouts agree on it), weights and gradients (the layout before's gradients
// set to its weights, so that each gradient element must arrive as that weight); the new padding (the table's rows
// and the output layer's columns 1,920 to 2,047) is written by no block: the weights there keep what the receiving
// buffer held (here 0xffff, a bf16 NaN), the gradients their zeros. Exact comparisons: the switch copies bits.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/scenario.hpp"
#include "executor/gpu/resharding_run.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/resharding.hpp"
#include "gpu/checks.hpp"
#include "strategies/validity.hpp"

namespace twin::exec {
namespace {

// The layout before (TP 1) holds the table's rows to 1,920, padding from 1,900 on: it moves those rows as any other;
// what no GPU held before, the layout after's new padding, starts at 1,920. (The first run, 2026-11-30 00:25 UTC on
// two H200s, drew the line at 1,900 and so counted rows 1,900-1,919 as left alone where the switch had moved them:
// 20 rows x 512 x 2 tensors of weight and of gradient mismatches, and nothing else.)
constexpr std::int64_t kNewPaddingFrom = 1920;
constexpr std::uint16_t kUntouched = 0xffff;

int padding_gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

Scenario padded_vocabulary_scenario() {
  return parse_scenario_text(R"({ "name": "padded vocabulary", "model": { "preset": "llama2-7b", "num_layers": 2,
      "hidden_size": 512, "ffn_hidden_size": 1408, "num_attention_heads": 8, "num_query_groups": 8,
      "vocab_size": 1900, "untie_embeddings_and_output_weights": true },
    "training": { "seq_length": 1024, "global_batch_size": 8 },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 2,
                              "intra_node": { "kind": "nvswitch", "bandwidth_GBps": 450 } } ] },
    "search": { "micro_batch_size": [1] } })",
                             "padded-vocabulary.json");
}

PlanPart padding_part_of(const Scenario& scenario, int tp) {
  PlanPart part;
  part.scenario = scenario;
  part.strategy.tensor_model_parallel_size = tp;
  part.strategy.sequence_parallel = tp > 1;
  part.strategy.micro_batch_size = 1;
  if (auto reason = complete_strategy(part.scenario, part.strategy)) throw std::runtime_error(*reason);
  return part;
}

// The unit's elements that are the layout after's new vocabulary padding (the table's rows, the untied output layer's
// [hidden, vocab] columns from 1,920 on), by the tensors' names and shards.
std::vector<bool> padding_mask(const ParameterUnitLayout& unit) {
  std::vector<bool> mask(static_cast<std::size_t>(unit.padded), false);
  for (const WeightTensor& w : unit.tensors)
    for (std::int64_t r = 0; r < w.rows; ++r)
      for (std::int64_t c = 0; c < w.cols; ++c) {
        std::int64_t global_col = -1;
        for (int s = 0; s < w.shard.segments; ++s)
          if (c >= w.shard.local_begin[s] && c < w.shard.local_begin[s] + w.shard.width[s])
            global_col = w.shard.global_begin[s] + c - w.shard.local_begin[s];
        const std::int64_t global_row = w.shard.row_offset + r;
        mask[static_cast<std::size_t>(w.offset + r * w.cols + c)] =
            (w.name == "embedding" && global_row >= kNewPaddingFrom) ||
            (w.name == "output" && global_col >= kNewPaddingFrom);
      }
  return mask;
}

std::vector<std::uint16_t> unit_to_host(const bf16* device, std::int64_t elements) {
  std::vector<std::uint16_t> host(static_cast<std::size_t>(elements));
  TWIN_CUDA_CHECK(cudaMemcpy(host.data(), device, host.size() * 2, cudaMemcpyDeviceToHost));
  return host;
}

struct PaddingCounts {
  std::int64_t weight_mismatches = -1, gradient_mismatches = 0, padding_left = 0;
};

TEST(ReshardingGpu, APaddedVocabularyArrivesAndItsNewPaddingIsLeftAlone) {
  if (padding_gpu_count() < 2) GTEST_SKIP() << "needs 2 CUDA GPUs; found " << padding_gpu_count();
  const Scenario scenario = padded_vocabulary_scenario();
  const PlanPart from = padding_part_of(scenario, 1), to = padding_part_of(scenario, 2);  // DP 2 -> TP 2
  const std::vector<ReshardBlock> blocks = plan_resharding(from, to, scenario.cluster, true);
  std::vector<ncclComm_t> comms(2);
  int devices[2] = {0, 1};
  TWIN_NCCL_CHECK(ncclCommInitAll(comms.data(), 2, devices));
  std::vector<PaddingCounts> counts(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      TWIN_CUDA_CHECK(cudaSetDevice(rank));
      cudaStream_t stream = nullptr;
      TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      StageParameters before(from.scenario, plan_parameter_units(from, rank, 7), stream, false);
      StageParameters after(to.scenario, plan_parameter_units(to, rank, 7), stream, false);
      for (ParameterUnit* unit : before.units())  // each gradient element: its weight's bits
        TWIN_CUDA_CHECK(cudaMemcpyAsync(unit->bf16_grads(), unit->params, unit->padded * 2, cudaMemcpyDeviceToDevice, stream));
      TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<std::vector<std::uint16_t>> initial;
      for (ParameterUnit* unit : after.units()) {
        initial.push_back(unit_to_host(unit->params, unit->padded));
        TWIN_CUDA_CHECK(cudaMemsetAsync(unit->params, 0xff, unit->padded * 2, stream));
        TWIN_CUDA_CHECK(cudaMemsetAsync(unit->bf16_grads(), 0, unit->padded * 2, stream));  // as the caller zeroes them
      }
      run_resharding(blocks, rank, before, after, comms[rank], stream);
      TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
      PaddingCounts& mine = counts[rank];
      mine.weight_mismatches = 0;
      std::size_t u = 0;
      for (ParameterUnit* unit : after.units()) {
        const std::vector<bool> padding = padding_mask(*unit);
        const std::vector<std::uint16_t> weights = unit_to_host(unit->params, unit->padded);
        const std::vector<std::uint16_t> grads = unit_to_host(unit->bf16_grads(), unit->padded);
        const auto [grad_begin, grad_end] = gradient_start_range(*unit);
        for (std::size_t i = 0; i < weights.size(); ++i) {
          const bool in_tensor = static_cast<std::int64_t>(i) < unit->elements;
          const bool starts = static_cast<std::int64_t>(i) >= grad_begin && static_cast<std::int64_t>(i) < grad_end;
          if (!in_tensor) continue;  // the unit buffer's alignment tail
          mine.padding_left += padding[i];
          mine.weight_mismatches += weights[i] != (padding[i] ? kUntouched : initial[u][i]);
          mine.gradient_mismatches += grads[i] != (padding[i] || !starts ? std::uint16_t{0} : initial[u][i]);
        }
        ++u;
      }
      TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  for (std::thread& t : threads) t.join();
  for (ncclComm_t comm : comms) TWIN_NCCL_CHECK(ncclCommDestroy(comm));
  EXPECT_EQ(counts[0].padding_left, 0);  // TP rank 0 holds vocabulary rows 0-1,023
  EXPECT_EQ(counts[1].padding_left, 2 * 128 * 512);  // rows and columns 1,920-2,047 of the table and output layer
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(counts[rank].weight_mismatches, 0) << "rank " << rank;
    EXPECT_EQ(counts[rank].gradient_mismatches, 0) << "rank " << rank;
  }
}

}  // namespace
}  // namespace twin::exec
