// Runs one rank's share of a hot-switching switch (executor/resharding.hpp's plan) on one stream: the
// rectangles it keeps copied between its two layouts' buffers, then one NCCL group with a send and a receive
// per peer (each peer's rectangles packed in plan order into one message), then the received ones unpacked.
#pragma once
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "executor/gpu/stage_parameters.hpp"
#include "executor/resharding.hpp"

namespace twin::exec {

// `blocks`: the whole plan (every rank computes the same); `comm`: a communicator of every GPU, rank = global
// rank. Gradient blocks write into `to`'s gradients, which the caller zeroed.
void run_resharding(const std::vector<ReshardBlock>& blocks, int rank, StageParameters& from, StageParameters& to,
                    ncclComm_t comm, cudaStream_t stream);

// A later part of the step in the layout of the part before (one set of buffers): zeroes the gradients this GPU
// does not start the part with (gradient_start_range), so that the part's reduction adds the earlier parts' in
// once.
void keep_gradient_start(StageParameters& params, cudaStream_t stream);

}  // namespace twin::exec
