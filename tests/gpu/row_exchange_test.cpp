// The grouped row exchange that expert parallelism's dispatch issues and calibration times (gpu/row_exchange.hpp),
// on the GPUs of one machine, one thread per GPU: an all-to-all in blocks per peer puts every row where the
// receiver's order says (block by block, peers in order within a block), checked against the host's placement.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "gpu/checks.hpp"
#include "gpu/row_exchange.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::gpu {
namespace {

// The value a row carries: who sent it and which of its rows it was.
std::int32_t row_value(int rank, std::int64_t row) { return static_cast<std::int32_t>(rank * 1'000'000 + row); }

TEST(RowExchangeGpu, AnAllToAllInBlocksLandsInTheReceiversOrder) {
  const int gpus = std::min(test::gpu_count(), 4);
  if (gpus < 2) GTEST_SKIP() << "needs 2 CUDA GPUs; found " << test::gpu_count();
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus));
  std::vector<int> devices(static_cast<std::size_t>(gpus));
  for (int g = 0; g < gpus; ++g) devices[g] = g;
  TWIN_NCCL_CHECK(ncclCommInitAll(comms.data(), gpus, devices.data()));
  for (int blocks : {1, 3, 16}) {
    const std::int64_t rows_per_peer = 48, rows = rows_per_peer * gpus, block_rows = rows_per_peer / blocks;
    std::vector<std::vector<std::int32_t>> received(static_cast<std::size_t>(gpus));
    std::vector<std::thread> threads;
    for (int rank = 0; rank < gpus; ++rank)
      threads.emplace_back([&, rank] {
        TWIN_CUDA_CHECK(cudaSetDevice(rank));
        cudaStream_t stream = nullptr;
        TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        std::vector<std::int32_t> host(static_cast<std::size_t>(rows));
        for (std::int64_t r = 0; r < rows; ++r) host[r] = row_value(rank, r);
        void *from = nullptr, *to = nullptr;
        TWIN_CUDA_CHECK(cudaMalloc(&from, rows * 4));
        TWIN_CUDA_CHECK(cudaMalloc(&to, rows * 4));
        TWIN_CUDA_CHECK(cudaMemcpy(from, host.data(), rows * 4, cudaMemcpyHostToDevice));
        TWIN_CUDA_CHECK(cudaMemset(to, 0xff, rows * 4));
        const AllToAllBlocks plan = all_to_all_blocks(gpus, rows_per_peer, blocks);
        exchange_row_blocks(plan.sends, plan.receives, from, to, 4, comms[rank], stream);
        TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
        received[rank].resize(static_cast<std::size_t>(rows));
        TWIN_CUDA_CHECK(cudaMemcpy(received[rank].data(), to, rows * 4, cudaMemcpyDeviceToHost));
        TWIN_CUDA_CHECK(cudaFree(from));
        TWIN_CUDA_CHECK(cudaFree(to));
        TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
      });
    for (std::thread& t : threads) t.join();
    // Rank `me` receives, block by block, each sender's block b of the rows that sender holds for `me`.
    for (int me = 0; me < gpus; ++me)
      for (int b = 0; b < blocks; ++b)
        for (int sender = 0; sender < gpus; ++sender)
          for (std::int64_t i = 0; i < block_rows; ++i) {
            const std::int64_t at = (b * gpus + sender) * block_rows + i;
            const std::int64_t sent_row = (me * blocks + b) * block_rows + i;
            ASSERT_EQ(received[me][at], row_value(sender, sent_row))
                << "blocks " << blocks << ", rank " << me << ", row " << at;
          }
  }
  for (ncclComm_t comm : comms) TWIN_NCCL_CHECK(ncclCommDestroy(comm));
}

TEST(RowExchange, BlocksMustDivideTheRowsOfAPeer) {
  EXPECT_THROW(all_to_all_blocks(2, 10, 3), std::invalid_argument);
  EXPECT_THROW(all_to_all_blocks(2, 2, 4), std::invalid_argument);
  EXPECT_EQ(all_to_all_blocks(2, 8, 4).sends.size(), 8u);
}

}  // namespace
}  // namespace twin::gpu
