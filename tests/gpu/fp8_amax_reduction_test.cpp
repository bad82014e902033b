// Delayed FP8 scaling with its amaxes all-reduced over GPUs (Transformer Engine's reduce_amax over Megatron's amax
// group; executor/gpu/fp8_linears.hpp runs it so): two GPUs cast their own tensors of different amplitudes into
// their states, all-reduce (max) the casts' amaxes with NCCL, and update the states (kernels::fp8_delayed_update).
// After every round both GPUs hold the same scale, the one a host reference of TE's rule computes from the larger of
// the two amaxes, and every byte each GPU cast is the host's quantisation with that round's scale. A state not cast
// in a round keeps its scale.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include <nccl.h>

#include "gpu/op_kernels.hpp"
#include "tests/gpu/fp8_test_util.hpp"

namespace twin::test {
namespace {

using kernels::Fp8Type;

// TE's amax_and_scale_update ("max", margin 0) on the host, from the reduced amaxes.
struct ReducedScaleReference {
  int history_len;
  Fp8Type type;
  std::deque<float> amaxes;  // newest first
  float scale = 1.0f;
  void record(float amax) {
    amaxes.push_front(amax);
    if (static_cast<int>(amaxes.size()) > history_len) amaxes.pop_back();
    float history = 0.0f;
    for (float a : amaxes) history = std::max(history, a);
    if (history > 0.0f && std::isfinite(history)) scale = kernels::fp8_max(type) / history;
  }
};

constexpr std::int64_t kAmaxTestRows = 136, kAmaxTestCols = 200;  // not multiples of the cast's 64 x 64 tile
constexpr int kAmaxTestHistory = 3, kAmaxTestStates = 2, kAmaxTestRounds = 9;

// Rank r's amplitude of state s in round t: the ranks' maxima differ, and each rank holds the larger one sometimes.
double amax_test_amplitude(int rank, int state, int round) {
  const double base[kAmaxTestRounds] = {3.0, 40.0, 0.5, 0.5, 2.0, 7.0, 0.25, 1.0, 6.0};
  return base[round] * (1.0 + 0.5 * state) * (((round + rank) % 2) == 0 ? 1.0 : 0.3);
}

// What one rank saw in a round: per state the inverse scale its cast used and its bytes; the state's next scale.
struct RoundSeen {
  std::vector<float> scale_inv, next_scale;
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<std::vector<double>> x;  // the bf16 tensor it cast, as float64
};

std::vector<RoundSeen> amax_test_rank(int rank, ncclUniqueId id, Fp8Type type) {
  TWIN_CUDA_CHECK(cudaSetDevice(rank));
  ncclComm_t comm = nullptr;
  TWIN_NCCL_CHECK(ncclCommInitRank(&comm, 2, id, rank));
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::size_t state_floats = kernels::fp8_delayed_state_floats(kAmaxTestHistory);
  gpu::DeviceBuffer states{kAmaxTestStates * state_floats * sizeof(float)}, amaxes{kAmaxTestStates * sizeof(float)};
  gpu::DeviceBuffer pointers{kAmaxTestStates * sizeof(float*)};
  std::vector<float*> host_pointers;
  for (int s = 0; s < kAmaxTestStates; ++s) {
    host_pointers.push_back(f32(states) + s * state_floats);
    kernels::fp8_delayed_state_reset(host_pointers.back(), kAmaxTestHistory, stream);
  }
  TWIN_CUDA_CHECK(cudaMemcpy(pointers.data(), host_pointers.data(), kAmaxTestStates * sizeof(float*), cudaMemcpyHostToDevice));
  TWIN_CUDA_CHECK(cudaMemsetAsync(amaxes.data(), 0, kAmaxTestStates * sizeof(float), stream));
  gpu::DeviceBuffer rowwise{static_cast<std::size_t>(kAmaxTestRows * kAmaxTestCols)};
  gpu::DeviceBuffer scaling{kernels::kFp8ScalingFloats * sizeof(float)};
  std::vector<RoundSeen> seen(kAmaxTestRounds);
  std::vector<std::int64_t> casts(kAmaxTestStates, 0);
  for (int t = 0; t < kAmaxTestRounds; ++t) {
    for (int s = 0; s < kAmaxTestStates; ++s) {
      if (s == 1 && t == 4) {  // state 1 sits this round out: nothing pending, its scale stays
        seen[t].scale_inv.push_back(0);
        seen[t].bytes.emplace_back();
        seen[t].x.emplace_back();
        continue;
      }
      const gpu::DeviceBuffer x = random_bf16(kAmaxTestRows * kAmaxTestCols, amax_test_amplitude(rank, s, t));
      TWIN_CUDA_CHECK(cudaDeviceSynchronize());  // filled on the default stream; cast on this one
      gpu::Fp8Cast call{bf(x), kAmaxTestRows, kAmaxTestCols, type, static_cast<std::uint8_t*>(rowwise.data()), nullptr, f32(scaling),
                        host_pointers[s], kAmaxTestHistory, casts[s]++, Fp8Recipe::delayed};
      call.reduced_amax = f32(amaxes) + s;
      gpu::launch(call, stream);
      TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
      seen[t].x.push_back(bf16_to_host(x.data(), kAmaxTestRows * kAmaxTestCols));
      seen[t].scale_inv.push_back(f32_to_host(scaling.data(), 1)[0]);
      seen[t].bytes.push_back(bytes_to_host(rowwise, kAmaxTestRows * kAmaxTestCols));
    }
    TWIN_NCCL_CHECK(ncclAllReduce(amaxes.data(), amaxes.data(), kAmaxTestStates, ncclFloat32, ncclMax, comm, stream));
    kernels::fp8_delayed_update(static_cast<float* const*>(pointers.data()), f32(amaxes), kAmaxTestStates, kAmaxTestHistory, type,
                                stream);
    TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<double> all = f32_to_host(states.data(), kAmaxTestStates * state_floats);
    for (int s = 0; s < kAmaxTestStates; ++s) seen[t].next_scale.push_back(static_cast<float>(all[s * state_floats]));
    EXPECT_EQ(f32_to_host(amaxes.data(), kAmaxTestStates), std::vector<double>(kAmaxTestStates, 0.0)) << "round " << t;
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  TWIN_NCCL_CHECK(ncclCommDestroy(comm));
  return seen;
}

class Fp8AmaxReductionTest : public ::testing::TestWithParam<Fp8Type> {};

TEST_P(Fp8AmaxReductionTest, TwoGpusWithDifferentDataEndWithTheReferenceScales) {
  REQUIRE_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 CUDA GPUs; found " << gpu_count();
  const Fp8Type type = GetParam();
  ncclUniqueId id{};
  TWIN_NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<std::vector<RoundSeen>> seen(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) threads.emplace_back([&, rank] { seen[rank] = amax_test_rank(rank, id, type); });
  for (std::thread& t : threads) t.join();
  TWIN_CUDA_CHECK(cudaSetDevice(0));
  std::vector<ReducedScaleReference> refs(kAmaxTestStates, ReducedScaleReference{kAmaxTestHistory, type});
  for (int t = 0; t < kAmaxTestRounds; ++t)
    for (int s = 0; s < kAmaxTestStates; ++s) {
      SCOPED_TRACE("round " + std::to_string(t) + " state " + std::to_string(s));
      if (!(s == 1 && t == 4)) {
        float amax = 0;
        for (int rank = 0; rank < 2; ++rank) {
          const HostFp8 q = quantize_with_scale(seen[rank][t].x[s], type, refs[s].scale);
          EXPECT_EQ(seen[rank][t].scale_inv[s], q.scale_inv) << "rank " << rank;
          EXPECT_EQ(seen[rank][t].bytes[s], q.bytes) << "rank " << rank;
          amax = std::max(amax, q.amax);
        }
        refs[s].record(amax);
      }
      for (int rank = 0; rank < 2; ++rank) EXPECT_EQ(seen[rank][t].next_scale[s], refs[s].scale) << "rank " << rank;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, Fp8AmaxReductionTest, ::testing::Values(Fp8Type::e4m3, Fp8Type::e5m2));

}  // namespace
}  // namespace twin::test
