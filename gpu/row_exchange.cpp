#include "gpu/row_exchange.hpp"

#include <stdexcept>

#include "gpu/checks.hpp"

namespace twin::gpu {

void exchange_row_blocks(const std::vector<RowBlock>& sends, const std::vector<RowBlock>& receives, const void* from,
                         void* to, std::int64_t row_bytes, ncclComm_t comm, cudaStream_t stream) {
  const auto* source = static_cast<const char*>(from);
  auto* target = static_cast<char*>(to);
  TWIN_NCCL_CHECK(ncclGroupStart());
  for (const RowBlock& b : sends)
    TWIN_NCCL_CHECK(ncclSend(source + b.row * row_bytes, static_cast<std::size_t>(b.rows * row_bytes), ncclChar,
                             b.peer, comm, stream));
  for (const RowBlock& b : receives)
    TWIN_NCCL_CHECK(ncclRecv(target + b.row * row_bytes, static_cast<std::size_t>(b.rows * row_bytes), ncclChar,
                             b.peer, comm, stream));
  TWIN_NCCL_CHECK(ncclGroupEnd());
}

AllToAllBlocks all_to_all_blocks(int ranks, std::int64_t rows_per_peer, int blocks_per_peer) {
  if (ranks < 1 || blocks_per_peer < 1 || rows_per_peer < blocks_per_peer || rows_per_peer % blocks_per_peer != 0)
    throw std::invalid_argument("all_to_all_blocks: rows per peer must be a positive multiple of the blocks per peer");
  const std::int64_t block_rows = rows_per_peer / blocks_per_peer;
  AllToAllBlocks blocks;
  for (int peer = 0; peer < ranks; ++peer)
    for (int b = 0; b < blocks_per_peer; ++b)
      blocks.sends.push_back({peer, (peer * blocks_per_peer + b) * block_rows, block_rows});
  for (int b = 0; b < blocks_per_peer; ++b)
    for (int peer = 0; peer < ranks; ++peer)
      blocks.receives.push_back({peer, (b * ranks + peer) * block_rows, block_rows});
  return blocks;
}

}  // namespace twin::gpu
