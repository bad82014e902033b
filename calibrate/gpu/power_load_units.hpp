// What one period of a sustained-clock or power load repeats (calibrate/gpu/sustained_clock.hpp): a unit of
// compute-bound work on the caller's stream, with its FLOPs. Three kinds, each run by the path training runs it on:
//   - one GEMM problem (the curve's 8192^3, BF16 or FP8) or a grouped one (count > 1: an MoE layer's experts, each
//     group one cuBLASLt call as the executor's grouped GEMM issues them), through GemmBench;
//   - attention, forward then backward, through the executor's attention (cuDNN's fused kernels).
// Why the grouped and attention units (issue 40): a training step of small expert GEMMs and attention drew 25-33%
// less power than a power model fitted on 8192^3 GEMMs said (docs/ACCURACY.md, "The power model"); class-pure loads
// of those kernels, measured the same way, say whether the energy per FLOP differs by kernel or only by clock.
#pragma once
#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "core/attention_flops.hpp"
#include "core/op.hpp"

namespace twin::gpu {

class ComputeUnit {
 public:
  virtual ~ComputeUnit() = default;
  virtual void launch() = 0;            // one unit, enqueued on the unit's stream
  virtual double flops() const = 0;     // of one unit, as the op vocabulary counts it (core/attention_flops.hpp)
  virtual std::string name() const = 0; // for the log
};

// `shape`'s GEMM (count > 1: grouped) on random operands.
std::unique_ptr<ComputeUnit> gemm_unit(const GemmShape& shape, cudaStream_t stream);
// Causal self-attention of `shape` (seq_q == seq_kv, head_dim == value head dim), forward then backward, on random
// operands.
std::unique_ptr<ComputeUnit> attention_unit(const AttentionShape& shape, cudaStream_t stream);

// The held-out loads' shapes: those twin's lowering emits for the shipped Qwen3-MoE-shaped scenario
// (scenarios/exec-qwen3-moe-small-1xH200.json at its best plan, micro-batch 4 of 2048 tokens): the experts' first
// GEMM, 128 experts of 512 routed rows (4 x 2048 tokens x top-8 / 128) by 1,536 (SwiGLU of 768) by 2,048, and the
// attention of 32 query heads over 4 key-value groups of 128.
GemmShape expert_load_shape();
AttentionShape attention_load_shape();

}  // namespace twin::gpu
