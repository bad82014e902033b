// Hot switching's switch on the GPUs of one machine (executor/gpu/resharding_run.hpp), one thread per GPU: a
// layout's weights, overwritten, come back from another layout's exactly as that layout initialises them; and the
// switch's bandwidth beside a plain NCCL send of the same bytes between the same GPUs (medians of 3 after two
// warm-ups; printed, not asserted).
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <thread>
#include <vector>

#include "core/scenario.hpp"
#include "executor/gpu/resharding_run.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/resharding.hpp"
#include "gpu/checks.hpp"
#include "strategies/validity.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::exec {
namespace {

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// Llama-2-7B widths, 2 layers, on `gpus` GPUs of one node.
Scenario seven_b_widths(int gpus) {
  return parse_scenario_text(R"({ "name": "resharding", "model": { "preset": "llama2-7b", "num_layers": 2 },
    "training": { "seq_length": 1024, "global_batch_size": 8 },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": )" +
                                 std::to_string(gpus) + R"(, "intra_node": { "kind": "nvswitch", "bandwidth_GBps": 450 } } ] },
    "search": { "micro_batch_size": [1] } })",
                             "resharding.json");
}

PlanPart part_of(const Scenario& scenario, int tp, int zero) {
  PlanPart part;
  part.scenario = scenario;
  part.strategy.tensor_model_parallel_size = tp;
  part.strategy.sequence_parallel = tp > 1;
  part.strategy.zero_stage = zero;
  part.strategy.micro_batch_size = 1;
  if (auto reason = complete_strategy(part.scenario, part.strategy)) throw std::runtime_error(*reason);
  return part;
}

// Per GPU, bf16 elements of every unit's weights.
std::vector<std::uint16_t> weights_of(StageParameters& params) {
  std::vector<std::uint16_t> out;
  for (ParameterUnit* unit : params.units()) {
    std::vector<std::uint16_t> host(static_cast<std::size_t>(unit->elements));
    TWIN_CUDA_CHECK(cudaMemcpy(host.data(), unit->params, host.size() * 2, cudaMemcpyDeviceToHost));
    out.insert(out.end(), host.begin(), host.end());
  }
  return out;
}

TEST(ReshardingGpu, WeightsArriveAsTheirLayoutInitialisesThemAndAtWhatBandwidth) {
  const int gpus = std::min(gpu_count(), 4);
  if (gpus < 2) GTEST_SKIP() << "needs 2 CUDA GPUs; found " << gpu_count();
  const Scenario scenario = seven_b_widths(gpus);
  const PlanPart from = part_of(scenario, 2, 1), to = part_of(scenario, 1, 1);  // TP 2 -> data parallel
  const std::vector<ReshardBlock> blocks = plan_resharding(from, to, scenario.cluster, false);
  const ReshardBytes bytes = reshard_bytes(blocks, gpus);
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus));
  std::vector<int> devices(static_cast<std::size_t>(gpus));
  for (int g = 0; g < gpus; ++g) devices[g] = g;
  TWIN_NCCL_CHECK(ncclCommInitAll(comms.data(), gpus, devices.data()));

  std::vector<double> switch_ms(gpus), send_ms(gpus);
  std::vector<int> mismatches(gpus, -1);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < gpus; ++rank)
    threads.emplace_back([&, rank] {
      TWIN_CUDA_CHECK(cudaSetDevice(rank));
      // As the runtime keeps it (executor/gpu/stage_runtime.cpp): the pool keeps what the switch's staging frees.
      cudaMemPool_t pool = nullptr;
      TWIN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, rank));
      std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
      TWIN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
      cudaStream_t stream = nullptr;
      TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      StageParameters before(from.scenario, plan_parameter_units(from, rank, 7), stream, false);
      StageParameters after(to.scenario, plan_parameter_units(to, rank, 7), stream, false);
      TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<std::uint16_t> expected = weights_of(after);
      for (ParameterUnit* unit : after.units())
        TWIN_CUDA_CHECK(cudaMemsetAsync(unit->params, 0xff, unit->padded * 2, stream));
      switch_ms[rank] =
          test::median_ms([&] { run_resharding(blocks, rank, before, after, comms[rank], stream); }, 3, stream);
      const std::vector<std::uint16_t> got = weights_of(after);
      mismatches[rank] = 0;
      for (std::size_t i = 0; i < got.size(); ++i) mismatches[rank] += got[i] != expected[i];
      // The same bytes between the same GPUs as one plain send per peer, from and to one buffer.
      std::vector<std::int64_t> to_peer(gpus, 0), from_peer(gpus, 0);
      for (const ReshardBlock& b : blocks) {
        if (b.from_rank == rank && b.to_rank != rank) to_peer[b.to_rank] += b.elements();
        if (b.to_rank == rank && b.from_rank != rank) from_peer[b.from_rank] += b.elements();
      }
      std::int64_t total = 0;
      for (int peer = 0; peer < gpus; ++peer) total += to_peer[peer] + from_peer[peer];
      void* buffer = nullptr;
      TWIN_CUDA_CHECK(cudaMalloc(&buffer, std::max<std::int64_t>(total, 1) * 2));
      send_ms[rank] = test::median_ms([&] {
        std::int64_t at = 0;
        TWIN_NCCL_CHECK(ncclGroupStart());
        for (int peer = 0; peer < gpus; ++peer) {
          if (to_peer[peer])
            TWIN_NCCL_CHECK(ncclSend(static_cast<std::uint16_t*>(buffer) + at, to_peer[peer], ncclBfloat16, peer,
                                     comms[rank], stream));
          at += to_peer[peer];
          if (from_peer[peer])
            TWIN_NCCL_CHECK(ncclRecv(static_cast<std::uint16_t*>(buffer) + at, from_peer[peer], ncclBfloat16, peer,
                                     comms[rank], stream));
          at += from_peer[peer];
        }
        TWIN_NCCL_CHECK(ncclGroupEnd());
      }, 3, stream);
      TWIN_CUDA_CHECK(cudaFree(buffer));
      TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  for (std::thread& t : threads) t.join();
  for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  for (int rank = 0; rank < gpus; ++rank) {
    EXPECT_EQ(mismatches[rank], 0) << "rank " << rank;
    const double gb = static_cast<double>(bytes.received[rank]) / 1e9;
    std::printf("[resharding] rank %d: %.3f GB received; switch %.2f ms (%.0f GB/s), plain sends %.2f ms (%.0f GB/s)\n",
                rank, gb, switch_ms[rank], gb / (switch_ms[rank] / 1e3), send_ms[rank], gb / (send_ms[rank] / 1e3));
  }
}

}  // namespace
}  // namespace twin::exec
