// nccl-tests' conventions: AllGather S is the gathered output, ReduceScatter S the scattered input,
// AlltoAll S each rank's whole send buffer (S / n to each peer, through ncclSend/ncclRecv in a group).
#include "calibrate/gpu/nccl_bench.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "gpu/checks.hpp"
#include "calibrate/gpu/fit.hpp"
#include "gpu/row_exchange.hpp"

namespace twin::gpu {
namespace {

constexpr Bytes kElementBytes = sizeof(float);

int comm_size(ncclComm_t comm) {
  int n = 0;
  TWIN_NCCL_CHECK(ncclCommCount(comm, &n));
  return n;
}

int comm_rank(ncclComm_t comm) {
  int r = 0;
  TWIN_NCCL_CHECK(ncclCommUserRank(comm, &r));
  return r;
}

}  // namespace

Bytes collective_size_bytes(OpKind collective, Bytes requested_bytes, int ranks) {
  Bytes count = requested_bytes / kElementBytes;
  if (collective == OpKind::all_gather || collective == OpKind::reduce_scatter || collective == OpKind::all_to_all)
    count = count / ranks * ranks;
  return count * kElementBytes;
}

Bytes all_to_all_blocks_size_bytes(Bytes requested_bytes, int ranks, int blocks_per_peer) {
  const Bytes unit = static_cast<Bytes>(ranks) * blocks_per_peer * kElementBytes;
  return requested_bytes / unit * unit;
}

int collective_iterations(Bytes size_bytes) {
  const double budget_bytes = 4.0 * kGiB;
  return std::clamp(static_cast<int>(budget_bytes / static_cast<double>(size_bytes)), 5, 100);
}

std::vector<Bytes> collective_sizes(Bytes max_bytes, bool quick) {
  std::vector<Bytes> sizes;
  for (Bytes s = 4096; s <= max_bytes; s *= quick ? 4 : 2) sizes.push_back(s);
  return sizes;
}

CollectiveBench::CollectiveBench(Bytes max_bytes, cudaStream_t stream)
    : stream_(stream), send_(max_bytes), recv_(max_bytes), scalar_(sizeof(float)), max_bytes_(max_bytes) {
  fill_random_f32(send_.data(), max_bytes / kElementBytes, 11, stream_);
  fill_random_f32(recv_.data(), max_bytes / kElementBytes, 12, stream_);
  TWIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CollectiveBench::launch(ncclComm_t comm, OpKind collective, Bytes size_bytes) {
  if (size_bytes > max_bytes_) throw std::invalid_argument("CollectiveBench: message larger than its buffers");
  const int n = comm_size(comm), rank = comm_rank(comm);
  const auto count = static_cast<std::size_t>(size_bytes / kElementBytes);
  auto* send = static_cast<char*>(send_.data());
  auto* recv = static_cast<char*>(recv_.data());
  const std::optional<Collective> nccl_call = collective_of(collective);
  if (!nccl_call) throw std::invalid_argument("CollectiveBench: not a collective: " + to_string(collective));
  switch (*nccl_call) {
    case Collective::all_reduce:
      TWIN_NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream_));
      break;
    case Collective::all_gather:
      TWIN_NCCL_CHECK(ncclAllGather(send, recv, count / n, ncclFloat32, comm, stream_));
      break;
    case Collective::reduce_scatter:
      TWIN_NCCL_CHECK(ncclReduceScatter(send, recv, count / n, ncclFloat32, ncclSum, comm, stream_));
      break;
    case Collective::all_to_all: {
      const std::size_t chunk = count / n;
      TWIN_NCCL_CHECK(ncclGroupStart());
      for (int peer = 0; peer < n; ++peer) {
        TWIN_NCCL_CHECK(ncclSend(send + peer * chunk * kElementBytes, chunk, ncclFloat32, peer, comm, stream_));
        TWIN_NCCL_CHECK(ncclRecv(recv + peer * chunk * kElementBytes, chunk, ncclFloat32, peer, comm, stream_));
      }
      TWIN_NCCL_CHECK(ncclGroupEnd());
      break;
    }
    case Collective::send:
    case Collective::recv:
      TWIN_NCCL_CHECK(ncclGroupStart());
      TWIN_NCCL_CHECK(ncclSend(send, count, ncclFloat32, (rank + 1) % n, comm, stream_));
      TWIN_NCCL_CHECK(ncclRecv(recv, count, ncclFloat32, (rank + n - 1) % n, comm, stream_));
      TWIN_NCCL_CHECK(ncclGroupEnd());
      break;
  }
}

double CollectiveBench::time_launches_us(const std::function<void()>& launch, int warmup, int iterations) {
  for (int i = 0; i < warmup; ++i) launch();
  cudaEvent_t start = nullptr, stop = nullptr;
  TWIN_CUDA_CHECK(cudaEventCreate(&start));
  TWIN_CUDA_CHECK(cudaEventCreate(&stop));
  TWIN_CUDA_CHECK(cudaEventRecord(start, stream_));
  for (int i = 0; i < iterations; ++i) launch();
  TWIN_CUDA_CHECK(cudaEventRecord(stop, stream_));
  TWIN_CUDA_CHECK(cudaEventSynchronize(stop));
  float elapsed_ms = 0;
  TWIN_CUDA_CHECK(cudaEventElapsedTime(&elapsed_ms, start, stop));
  TWIN_CUDA_CHECK(cudaEventDestroy(start));
  TWIN_CUDA_CHECK(cudaEventDestroy(stop));
  return 1e3 * elapsed_ms / iterations;
}

double CollectiveBench::time_us(ncclComm_t comm, OpKind collective, Bytes size_bytes, int warmup, int iterations) {
  return time_launches_us([&] { launch(comm, collective, size_bytes); }, warmup, iterations);
}

CollectivePoint CollectiveBench::point_over_ranks(ncclComm_t comm, OpKind collective, Bytes size_bytes, double mine_us) {
  // nccl-tests reports the time averaged over ranks.
  const float mine = static_cast<float>(mine_us);
  TWIN_CUDA_CHECK(cudaMemcpyAsync(scalar_.data(), &mine, sizeof(float), cudaMemcpyHostToDevice, stream_));
  TWIN_NCCL_CHECK(ncclAllReduce(scalar_.data(), scalar_.data(), 1, ncclFloat32, ncclSum, comm, stream_));
  float sum = 0;
  TWIN_CUDA_CHECK(cudaMemcpyAsync(&sum, scalar_.data(), sizeof(float), cudaMemcpyDeviceToHost, stream_));
  TWIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const int n = comm_size(comm);
  CollectivePoint point;
  point.size_bytes = size_bytes;
  point.time_us = sum / n;
  point.algbw_GBps = static_cast<double>(size_bytes) / (point.time_us * 1e3);
  point.busbw_GBps = point.algbw_GBps * busbw_factor(collective, n);
  return point;
}

CollectivePoint CollectiveBench::measure(ncclComm_t comm, OpKind collective, Bytes size_bytes) {
  const int iterations = collective_iterations(size_bytes);
  return point_over_ranks(comm, collective, size_bytes,
                          time_us(comm, collective, size_bytes, std::max(2, iterations / 5), iterations));
}

void CollectiveBench::launch_blocks(ncclComm_t comm, Bytes size_bytes, int blocks_per_peer) {
  if (size_bytes > max_bytes_) throw std::invalid_argument("CollectiveBench: message larger than its buffers");
  const int n = comm_size(comm);
  const AllToAllBlocks blocks = all_to_all_blocks(n, size_bytes / n, blocks_per_peer);  // rows of one byte
  exchange_row_blocks(blocks.sends, blocks.receives, send_.data(), recv_.data(), 1, comm, stream_);
}

CollectivePoint CollectiveBench::measure_blocks(ncclComm_t comm, Bytes size_bytes, int blocks_per_peer) {
  const int iterations = collective_iterations(size_bytes);
  const double mine_us = time_launches_us([&] { launch_blocks(comm, size_bytes, blocks_per_peer); },
                                          std::max(2, iterations / 5), iterations);
  return point_over_ranks(comm, OpKind::all_to_all, size_bytes, mine_us);
}

}  // namespace twin::gpu
