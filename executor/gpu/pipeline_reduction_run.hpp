// Runs an asymmetric plan's gradient reduction across pipelines (executor/pipeline_reduction.hpp) on one GPU:
// per segment, each of its reductions this GPU holds pieces of is packed into one staging buffer, the buffers
// are all-reduced in one NCCL group (each over its holders' communicator, with the GPU's scale as NCCL's
// pre-multiplied sum), and unpacked into the gradient buffers.
#pragma once
#include <map>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "executor/gpu/communicators.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/pipeline_reduction.hpp"

namespace twin::exec {

class PipelineReductionRun {
 public:
  // `reductions`: every rank's (the plan's); keeps this rank's. Makes a scaled sum per reduction it takes part in.
  PipelineReductionRun(const std::vector<PipelineReduction>& reductions, int rank, const Communicators& comms);
  ~PipelineReductionRun();
  PipelineReductionRun(const PipelineReductionRun&) = delete;
  PipelineReductionRun& operator=(const PipelineReductionRun&) = delete;

  void run(int segment, StageParameters& params, cudaStream_t stream) const;

 private:
  struct Mine {
    std::vector<ReductionPiece> pieces;
    std::int64_t elements = 0;
    ncclComm_t comm = nullptr;
    ncclRedOp_t sum = ncclSum;
  };
  std::map<int, std::vector<Mine>> by_segment_;
};

}  // namespace twin::exec
