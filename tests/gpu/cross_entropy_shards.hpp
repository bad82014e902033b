// The vocabulary-parallel cross-entropy of logits [rows, vocab] split into two shards at column `split`, merged as
// the executor merges them over TP (executor/gpu/dense_block_ends.cpp; the all-reduces done on the host): the loss
// per row and the logits' gradient, with the logits soft-capped at `softcap` (0: none). The kernel tests compare them
// with their float64 references.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu/kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {

struct ShardedCrossEntropy {
  std::vector<double> loss, grad;
};

inline ShardedCrossEntropy two_shard_cross_entropy(const gpu::DeviceBuffer& logits, const gpu::DeviceBuffer& targets,
                                                   std::int64_t rows, std::int64_t vocab, std::int64_t split,
                                                   float grad_scale, float softcap) {
  namespace k = twin::kernels;
  const std::int64_t starts[2] = {0, split}, widths[2] = {split, vocab - split};
  std::vector<gpu::DeviceBuffer> shards, local_max, sums;
  std::vector<float> global_max(rows, -INFINITY), global_sum(rows, 0), global_target(rows, 0);
  for (int s = 0; s < 2; ++s) {  // column ranges of the logits copied out as [rows, width] tensors
    shards.emplace_back(rows * widths[s] * 2);
    TWIN_CUDA_CHECK(cudaMemcpy2D(shards[s].data(), widths[s] * 2, bf(logits) + starts[s], vocab * 2, widths[s] * 2,
                                 rows, cudaMemcpyDeviceToDevice));
    local_max.push_back(poisoned(rows * 4));
    sums.push_back(poisoned(rows * 4));
    auto target = poisoned(rows * 4);
    k::cross_entropy_local_stats(bf(shards[s]), i32(targets), f32(local_max[s]), f32(sums[s]), f32(target), rows,
                                 widths[s], starts[s], softcap, nullptr);
    const auto hm = f32_to_host(local_max[s].data(), rows), ht = f32_to_host(target.data(), rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      global_max[r] = std::max(global_max[r], static_cast<float>(hm[r]));
      global_target[r] += static_cast<float>(ht[r]);
    }
  }
  auto dmax = upload(global_max);
  for (int s = 0; s < 2; ++s) {
    k::cross_entropy_rescale_sum_exp(f32(local_max[s]), f32(dmax), f32(sums[s]), rows, nullptr);
    const auto hs = f32_to_host(sums[s].data(), rows);
    for (std::int64_t r = 0; r < rows; ++r) global_sum[r] += static_cast<float>(hs[r]);
  }
  auto dsum = upload(global_sum), dtarget = upload(global_target), loss = poisoned(rows * 4);
  k::cross_entropy_loss(f32(dmax), f32(dsum), f32(dtarget), f32(loss), rows, nullptr);
  ShardedCrossEntropy out{f32_to_host(loss.data(), rows), std::vector<double>(rows * vocab)};
  for (int s = 0; s < 2; ++s) {
    k::cross_entropy_backward(bf(shards[s]), f32(dmax), f32(dsum), i32(targets), bf(shards[s]), rows, widths[s],
                              starts[s], grad_scale, softcap, nullptr);  // in place, as the executor runs it
    const auto h = bf16_to_host(shards[s].data(), rows * widths[s]);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t v = 0; v < widths[s]; ++v) out.grad[r * vocab + starts[s] + v] = h[r * widths[s] + v];
  }
  return out;
}

}  // namespace twin::test
