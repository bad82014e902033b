#include "executor/gpu/pipeline_reduction_run.hpp"

#include <algorithm>
#include <utility>

#include <cuda_bf16.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

PipelineReductionRun::PipelineReductionRun(const std::vector<PipelineReduction>& reductions, int rank,
                                           const Communicators& comms) {
  for (const PipelineReduction& r : reductions) {
    const auto at = std::find(r.ranks.begin(), r.ranks.end(), rank);
    if (at == r.ranks.end()) continue;
    const std::size_t holder = static_cast<std::size_t>(at - r.ranks.begin());
    Mine mine{r.pieces[holder], r.elements, comms.reduction(r.ranks), ncclSum};
    __nv_bfloat16 scale = __float2bfloat16(static_cast<float>(r.scale[holder]));
    TWIN_NCCL_CHECK(ncclRedOpCreatePreMulSum(&mine.sum, &scale, ncclBfloat16, ncclScalarHostImmediate, mine.comm));
    by_segment_[r.segment].push_back(std::move(mine));
  }
}

PipelineReductionRun::~PipelineReductionRun() {
  for (auto& [segment, mine] : by_segment_)
    for (Mine& m : mine) ncclRedOpDestroy(m.sum, m.comm);  // best effort: a failed run has aborted its communicators
}

void PipelineReductionRun::run(int segment, StageParameters& params, cudaStream_t stream) const {
  const auto found = by_segment_.find(segment);
  if (found == by_segment_.end()) return;
  const std::vector<Mine>& mine = found->second;
  std::int64_t total = 0;
  for (const Mine& m : mine) total += m.elements;
  bf16* staging = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&staging), total * sizeof(bf16), stream));
  const auto each_piece = [&](const auto& copy) {
    std::int64_t at = 0;
    for (const Mine& m : mine)
      for (const ReductionPiece& piece : m.pieces) {
        copy(params.unit(piece.unit).grads + piece.first, staging + at, piece);
        at += piece.elements();
      }
  };
  each_piece([&](bf16* grads, bf16* packed, const ReductionPiece& p) {
    kernels::copy_bf16_rows(packed, p.cols, grads, p.ld, p.rows, p.cols, stream);
  });
  TWIN_NCCL_CHECK(ncclGroupStart());
  std::int64_t at = 0;
  for (const Mine& m : mine) {
    TWIN_NCCL_CHECK(ncclAllReduce(staging + at, staging + at, m.elements, ncclBfloat16, m.sum, m.comm, stream));
    at += m.elements;
  }
  TWIN_NCCL_CHECK(ncclGroupEnd());
  each_piece([&](bf16* grads, bf16* packed, const ReductionPiece& p) {
    kernels::copy_bf16_rows(grads, p.ld, packed, p.cols, p.rows, p.cols, stream);
  });
  TWIN_CUDA_CHECK(cudaFreeAsync(staging, stream));
}

}  // namespace twin::exec
