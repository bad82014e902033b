// Runs an asymmetric plan's gradient reduction across pipelines (executor/pipeline_reduction.hpp) on one GPU:
// per segment, the pieces of each reduction this GPU holds are packed into one staging buffer and reduced in one
// NCCL group (each over its holders' communicator, with the GPU's scale as NCCL's pre-multiplied sum).
// - ZeRO-0: all-reduced, and unpacked into the gradient buffers.
// - ZeRO-1 (optimizer state sharded over the pipelines): reduce-scattered; holder k of n keeps part k of each
//   reduction's packed elements (padded to a multiple of n): their reduced gradients, AdamW state and updated
//   weights, which `gather` all-gathers and unpacks into every holder's weights after the step. Each element of
//   the model lies in one part, so the gradient norm sums the parts over all GPUs.
#pragma once
#include <map>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "core/optimizer_precision.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/pipeline_reduction.hpp"

namespace twin::exec {

class PipelineReductionRun {
 public:
  // `reductions`: every rank's (the plan's); keeps this rank's. `sharded`: ZeRO-1's optimizer state, stored as it
  // says (null: ZeRO-0); its master weights start from `params` (initialised, on `stream`).
  PipelineReductionRun(const std::vector<PipelineReduction>& reductions, int rank, const Communicators& comms,
                       StageParameters& params, const OptimizerPrecision* sharded, cudaStream_t stream);
  ~PipelineReductionRun();
  PipelineReductionRun(const PipelineReductionRun&) = delete;
  PipelineReductionRun& operator=(const PipelineReductionRun&) = delete;

  bool shards_optimizer() const { return sharded_; }
  // Device bytes of ZeRO-1's parts (gradients, weights, AdamW state); the staging comes from the pool.
  std::size_t allocated_bytes() const { return allocated_bytes_; }
  // The segment's gradients summed over the pipelines: into the gradient buffers (ZeRO-0) or this GPU's parts.
  void reduce(int segment, StageParameters& params, cudaStream_t stream) const;
  // ZeRO-1: every holder's updated part of the segment's weights into the weight buffers.
  void gather(int segment, StageParameters& params, cudaStream_t stream) const;
  // ZeRO-1: the sum of squares of this GPU's parts, added to *sum_squares; AdamW on them.
  void add_sum_squares(float* partials, float* sum_squares, cudaStream_t stream) const;
  void step(const kernels::AdamWParams& adam, const float* grad_scale, cudaStream_t stream) const;

 private:
  struct Mine {
    std::vector<ReductionPiece> pieces;
    std::int64_t elements = 0, part = 0;  // part: the elements over the holders, rounded up (ZeRO-1's share)
    int holder = 0, holders = 1;
    std::int64_t padded() const { return part * holders; }  // the packed elements' room in the staging buffer
    ncclComm_t comm = nullptr;
    ncclRedOp_t sum = ncclSum;
    bf16 *part_grads = nullptr, *part_params = nullptr;  // ZeRO-1
    kernels::AdamWState adam;
  };
  // Packs (or unpacks) every piece of `mine` between the unit buffers (weights or gradients) and `packed`.
  static void pack(const std::vector<const Mine*>& mine, StageParameters& params, bool gradients, bf16* packed,
                   bool into_packed, cudaStream_t stream);
  std::vector<const Mine*> of_segment(int segment) const;
  std::map<int, std::vector<Mine>> by_segment_;
  std::vector<void*> allocations_;
  std::size_t allocated_bytes_ = 0;
  bool sharded_ = false;
};

}  // namespace twin::exec
