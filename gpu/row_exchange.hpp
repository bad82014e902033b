// A grouped exchange of row blocks between the ranks of a communicator: every send and receive of the list in one
// NCCL group, sends first, each list in its order (NCCL matches a pair of ranks' sends and receives in the order
// they were issued). Expert parallelism's dispatch and combine issue it (executor/gpu/moe_block.cpp), one block per
// (peer, local expert); calibration times it with equal blocks (calibrate/gpu/nccl_bench.hpp), so that the
// all-to-all the simulator prices by blocks per peer is the exchange the executor runs.
#pragma once
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

namespace twin::gpu {

struct RowBlock {
  int peer = 0;           // the other end: a rank of the communicator (this rank itself is allowed)
  std::int64_t row = 0;   // first row in this rank's buffer
  std::int64_t rows = 0;  // > 0
};

// Sends `sends` out of `from` and receives `receives` into `to`, rows of `row_bytes` bytes each, on `stream`.
void exchange_row_blocks(const std::vector<RowBlock>& sends, const std::vector<RowBlock>& receives, const void* from,
                         void* to, std::int64_t row_bytes, ncclComm_t comm, cudaStream_t stream);

// The blocks of an all-to-all of `rows_per_peer` rows to each of `ranks` ranks, each peer's rows in
// `blocks_per_peer` equal blocks: sends peer by peer (block by block within a peer), receives block by block
// (peer by peer within a block), the orders of the executor's dispatch (sorted by expert on the sender, by local
// expert on the receiver). rows_per_peer must be a multiple of blocks_per_peer.
struct AllToAllBlocks {
  std::vector<RowBlock> sends, receives;
};
AllToAllBlocks all_to_all_blocks(int ranks, std::int64_t rows_per_peer, int blocks_per_peer);

}  // namespace twin::gpu
