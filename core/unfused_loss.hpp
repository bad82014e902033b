// Megatron-LM's cross-entropy without fusion (`framework.cross_entropy_loss_fusion` false:
// megatron/core/tensor_parallel/cross_entropy.py `_VocabParallelCrossEntropy` on `logits.float()`), as the passes
// over the logits each of its kernels makes, in bytes per logit of the rank's vocabulary shard. Twin's executor
// launches these kernels (executor/gpu/dense_block_ends.cpp, gpu/kernels/cross_entropy_unfused.cu) and the cost
// model prices them (cost/compute_kinds.cpp, cost/kernel_cost.cpp); the memory model keeps the fp32 softmax
// (core/layer.cpp). Until 2026-12-03 the same bytes were priced as the fused loss kernel plus an elementwise op
// beside it (2 + 36 forward, 4 + 10 backward) with two launches.
//
//   forward   cast the bf16 logits to fp32        read 2, write 4
//             the row maximum                    read 4            (all-reduce max over TP)
//             subtract it, in place              read 4, write 4
//             exponentiate, in place             read 4, write 4
//             sum the row (and gather the target logit)  read 4     (all-reduce sum over TP)
//             divide by the sum, in place: the softmax kept for the backward    read 4, write 4
//   backward  softmax - one-hot(target), times the loss's scale, in place       read 4, write 4
//             cast the gradient to bf16          read 4, write 2
#pragma once
#include <array>

namespace twin {

inline constexpr std::array kUnfusedLossForwardBytesPerLogit{6, 4, 8, 8, 4, 8};
inline constexpr std::array kUnfusedLossBackwardBytesPerLogit{8, 6};

constexpr int sum_of(const auto& bytes) {
  int total = 0;
  for (int b : bytes) total += b;
  return total;
}

}  // namespace twin
