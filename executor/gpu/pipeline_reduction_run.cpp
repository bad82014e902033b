#include "executor/gpu/pipeline_reduction_run.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <cuda_bf16.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {
namespace {

kernels::StateType state_type(StateDtype dtype) {
  return dtype == StateDtype::bf16 ? kernels::StateType::bf16 : kernels::StateType::f32;
}

}  // namespace

PipelineReductionRun::PipelineReductionRun(const std::vector<PipelineReduction>& reductions, int rank,
                                           const Communicators& comms, StageParameters& params,
                                           const OptimizerPrecision* sharded, cudaStream_t stream)
    : sharded_(sharded != nullptr) {
  // The pieces are cut from whole buffers, kept for the run: an asymmetric plan's stages hold their weights at ZeRO 0
  // (its ZeRO-1 shards over the pipelines, here), so no unit keeps only a ZeRO shard.
  for (const ParameterUnit* unit : params.units())
    if (unit->shards_weights() || unit->shards_gradients())
      throw std::logic_error("executor: reductions across pipelines of a unit that keeps only its ZeRO shard");
  const auto allocate = [&](std::size_t bytes) {
    void* p = nullptr;
    TWIN_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
    allocations_.push_back(p);
    allocated_bytes_ += bytes;
    return p;
  };
  for (const PipelineReduction& r : reductions) {
    const auto at = std::find(r.ranks.begin(), r.ranks.end(), rank);
    if (at == r.ranks.end()) continue;
    const int holders = static_cast<int>(r.ranks.size());
    Mine mine;
    mine.holder = static_cast<int>(at - r.ranks.begin());
    mine.holders = holders;
    mine.pieces = r.pieces[static_cast<std::size_t>(mine.holder)];
    mine.elements = r.elements;
    mine.part = (r.elements + holders - 1) / holders;
    mine.comm = comms.reduction(r.ranks);
    __nv_bfloat16 scale = __float2bfloat16(static_cast<float>(r.scale[static_cast<std::size_t>(mine.holder)]));
    TWIN_NCCL_CHECK(ncclRedOpCreatePreMulSum(&mine.sum, &scale, ncclBfloat16, ncclScalarHostImmediate, mine.comm));
    if (sharded_) {
      const std::size_t part = static_cast<std::size_t>(mine.part);
      mine.part_grads = static_cast<bf16*>(allocate(part * sizeof(bf16)));
      mine.part_params = static_cast<bf16*>(allocate(part * sizeof(bf16)));
      mine.adam.m_type = state_type(sharded->exp_avg);
      mine.adam.v_type = state_type(sharded->exp_avg_sq);
      mine.adam.m = allocate(part * bytes_of(sharded->exp_avg));
      mine.adam.v = allocate(part * bytes_of(sharded->exp_avg_sq));
      TWIN_CUDA_CHECK(cudaMemsetAsync(mine.adam.m, 0, part * bytes_of(sharded->exp_avg), stream));
      TWIN_CUDA_CHECK(cudaMemsetAsync(mine.adam.v, 0, part * bytes_of(sharded->exp_avg_sq), stream));
      // This holder's part of the packed weights, as initialised.
      bf16* packed = nullptr;
      TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&packed), mine.padded() * sizeof(bf16), stream));
      TWIN_CUDA_CHECK(cudaMemsetAsync(packed, 0, mine.padded() * sizeof(bf16), stream));
      pack({&mine}, params, false, packed, true, stream);
      TWIN_CUDA_CHECK(cudaMemcpyAsync(mine.part_params, packed + mine.holder * mine.part, part * sizeof(bf16),
                                      cudaMemcpyDeviceToDevice, stream));
      TWIN_CUDA_CHECK(cudaFreeAsync(packed, stream));
      if (sharded->store_param_remainders) {  // zero: the master is the initial bf16 parameters exactly
        mine.adam.remainders = static_cast<std::int16_t*>(allocate(part * sizeof(std::int16_t)));
        TWIN_CUDA_CHECK(cudaMemsetAsync(mine.adam.remainders, 0, part * sizeof(std::int16_t), stream));
      } else if (state_type(sharded->main_params) == kernels::StateType::f32) {
        mine.adam.master = static_cast<float*>(allocate(part * sizeof(float)));
        kernels::bf16_to_f32(mine.part_params, mine.adam.master, mine.part, stream);
      }
    }
    by_segment_[r.segment].push_back(std::move(mine));
  }
}

PipelineReductionRun::~PipelineReductionRun() {
  for (auto& [segment, mine] : by_segment_)
    for (Mine& m : mine) ncclRedOpDestroy(m.sum, m.comm);  // best effort: a failed run has aborted its communicators
  for (void* p : allocations_) cudaFree(p);
}

std::vector<const PipelineReductionRun::Mine*> PipelineReductionRun::of_segment(int segment) const {
  std::vector<const Mine*> out;
  const auto found = by_segment_.find(segment);
  if (found != by_segment_.end())
    for (const Mine& m : found->second) out.push_back(&m);
  return out;
}

void PipelineReductionRun::pack(const std::vector<const Mine*>& mine, StageParameters& params, bool gradients,
                                bf16* packed, bool into_packed, cudaStream_t stream) {
  std::int64_t at = 0;
  for (const Mine* m : mine) {
    std::int64_t piece_at = at;
    for (const ReductionPiece& p : m->pieces) {
      ParameterUnit& unit = params.unit(p.unit);
      bf16* buffer = (gradients ? unit.bf16_grads() : unit.params) + p.first;
      if (into_packed)
        kernels::copy_bf16_rows(packed + piece_at, p.cols, buffer, p.ld, p.rows, p.cols, stream);
      else
        kernels::copy_bf16_rows(buffer, p.ld, packed + piece_at, p.cols, p.rows, p.cols, stream);
      piece_at += p.elements();
    }
    at += m->padded();
  }
}

void PipelineReductionRun::reduce(int segment, StageParameters& params, cudaStream_t stream) const {
  const std::vector<const Mine*> mine = of_segment(segment);
  if (mine.empty()) return;
  std::int64_t total = 0;
  for (const Mine* m : mine) total += m->padded();
  bf16* staging = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&staging), total * sizeof(bf16), stream));
  if (sharded_) TWIN_CUDA_CHECK(cudaMemsetAsync(staging, 0, total * sizeof(bf16), stream));  // the padding
  pack(mine, params, true, staging, true, stream);
  TWIN_NCCL_CHECK(ncclGroupStart());
  std::int64_t at = 0;
  for (const Mine* m : mine) {
    if (sharded_)
      TWIN_NCCL_CHECK(ncclReduceScatter(staging + at, m->part_grads, m->part, ncclBfloat16, m->sum, m->comm, stream));
    else
      TWIN_NCCL_CHECK(ncclAllReduce(staging + at, staging + at, m->elements, ncclBfloat16, m->sum, m->comm, stream));
    at += m->padded();
  }
  TWIN_NCCL_CHECK(ncclGroupEnd());
  if (!sharded_) pack(mine, params, true, staging, false, stream);
  TWIN_CUDA_CHECK(cudaFreeAsync(staging, stream));
}

void PipelineReductionRun::gather(int segment, StageParameters& params, cudaStream_t stream) const {
  const std::vector<const Mine*> mine = of_segment(segment);
  if (mine.empty() || !sharded_) return;
  std::int64_t total = 0;
  for (const Mine* m : mine) total += m->padded();
  bf16* staging = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&staging), total * sizeof(bf16), stream));
  TWIN_NCCL_CHECK(ncclGroupStart());
  std::int64_t at = 0;
  for (const Mine* m : mine) {
    TWIN_NCCL_CHECK(ncclAllGather(m->part_params, staging + at, m->part, ncclBfloat16, m->comm, stream));
    at += m->padded();
  }
  TWIN_NCCL_CHECK(ncclGroupEnd());
  pack(mine, params, false, staging, false, stream);
  TWIN_CUDA_CHECK(cudaFreeAsync(staging, stream));
}

void PipelineReductionRun::add_sum_squares(float* partials, float* sum_squares, cudaStream_t stream) const {
  for (const auto& [segment, mine] : by_segment_)
    for (const Mine& m : mine)  // the padding at the end of the last holder's part is zero
      kernels::grad_sum_squares(m.part_grads, m.part, partials, sum_squares, stream);
}

void PipelineReductionRun::step(const kernels::AdamWParams& adam, const float* grad_scale, cudaStream_t stream) const {
  for (const auto& [segment, mine] : by_segment_)
    for (const Mine& m : mine) kernels::adamw_step(m.adam, m.part_grads, m.part_params, m.part, adam, grad_scale, stream);
}

}  // namespace twin::exec
