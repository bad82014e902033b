#include "executor/gpu/resharding_run.hpp"

#include <map>
#include <utility>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {
namespace {

// Where a block's rectangle starts in a GPU's buffers (`first`: an element of the unit's whole buffer). A unit that
// keeps only its shard of the weights (ZeRO-3) or gradients (ZeRO >= 2) between the ops that need them whole holds
// the shard here (the switch runs before the part's first op), and the plan moves only shards of those
// (executor/resharding.cpp's valid_range): the rectangle's end is checked to lie in it too.
bf16* block_start(StageParameters& params, const ReshardBlock& b, std::int64_t first, std::int64_t ld) {
  const ParameterUnit& unit = params.unit(b.unit);
  const auto at = [&](std::int64_t e) { return b.gradient ? unit.bf16_gradients_at(e) : unit.weights_at(e); };
  at(first + (b.rows - 1) * ld + b.cols);  // throws where the rectangle leaves the shard
  return at(first);
}

constexpr std::size_t kElement = sizeof(bf16);

}  // namespace

void run_resharding(const std::vector<ReshardBlock>& blocks, int rank, StageParameters& from, StageParameters& to,
                    ncclComm_t comm, cudaStream_t stream) {
  std::map<int, std::int64_t> send_elements, recv_elements;  // per peer
  for (const ReshardBlock& b : blocks) {
    if (b.from_rank == rank && b.to_rank == rank) {
      kernels::copy_bf16_rows(block_start(to, b, b.to_first, b.to_ld), b.to_ld,
                              block_start(from, b, b.from_first, b.from_ld), b.from_ld, b.rows, b.cols, stream);
    } else if (b.from_rank == rank) {
      send_elements[b.to_rank] += b.elements();
    } else if (b.to_rank == rank) {
      recv_elements[b.from_rank] += b.elements();
    }
  }
  if (send_elements.empty() && recv_elements.empty()) return;
  // One staging buffer: every peer's outgoing message, then every peer's incoming one.
  std::map<int, std::int64_t> send_at, recv_at;
  std::int64_t total = 0;
  for (const auto& [peer, n] : send_elements) send_at[peer] = std::exchange(total, total + n);
  for (const auto& [peer, n] : recv_elements) recv_at[peer] = std::exchange(total, total + n);
  bf16* staging = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&staging), total * kElement, stream));
  std::map<int, std::int64_t> packed = send_at;
  for (const ReshardBlock& b : blocks)
    if (b.from_rank == rank && b.to_rank != rank)
      kernels::copy_bf16_rows(staging + std::exchange(packed[b.to_rank], packed[b.to_rank] + b.elements()), b.cols,
                              block_start(from, b, b.from_first, b.from_ld), b.from_ld, b.rows, b.cols, stream);
  TWIN_NCCL_CHECK(ncclGroupStart());
  for (const auto& [peer, n] : send_elements)
    TWIN_NCCL_CHECK(ncclSend(staging + send_at[peer], n, ncclBfloat16, peer, comm, stream));
  for (const auto& [peer, n] : recv_elements)
    TWIN_NCCL_CHECK(ncclRecv(staging + recv_at[peer], n, ncclBfloat16, peer, comm, stream));
  TWIN_NCCL_CHECK(ncclGroupEnd());
  std::map<int, std::int64_t> unpacked = recv_at;
  for (const ReshardBlock& b : blocks)
    if (b.to_rank == rank && b.from_rank != rank)
      kernels::copy_bf16_rows(block_start(to, b, b.to_first, b.to_ld), b.to_ld,
                              staging + std::exchange(unpacked[b.from_rank], unpacked[b.from_rank] + b.elements()),
                              b.cols, b.rows, b.cols, stream);
  TWIN_CUDA_CHECK(cudaFreeAsync(staging, stream));
}

void keep_gradient_start(StageParameters& params, cudaStream_t stream) {
  for (ParameterUnit* unit : params.units()) {
    if (unit->shards_gradients()) continue;  // it keeps its shard only, which is the range it starts with
    const auto [begin, end] = gradient_start_range(*unit);
    if (begin > 0) TWIN_CUDA_CHECK(cudaMemsetAsync(unit->bf16_grads(), 0, begin * kElement, stream));
    if (end < unit->padded)
      TWIN_CUDA_CHECK(cudaMemsetAsync(unit->bf16_grads() + end, 0, (unit->padded - end) * kElement, stream));
  }
}

}  // namespace twin::exec
