// The data-parallel and optimizer ops: per-unit gradient reduction (all-reduce, or reduce-scatter into
// the ZeRO shard), parameter gathers, the global gradient norm, clipping and AdamW (its state as training.optimizer_precision stores it).
// Megatron also sums sequence-parallel norm-weight gradients over TP and reduces the norm over TP and
// PP; the graph has no op for those, so they run inside the first optimizer-phase op (tiny messages).
#include <algorithm>
#include <stdexcept>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/stage_runtime.hpp"

namespace twin::exec {
namespace {

// The part of [begin, begin + count) that lies in this rank's reduced shard [shard_begin, shard_end).
std::pair<std::int64_t, std::int64_t> within(std::int64_t begin, std::int64_t count, std::int64_t shard_begin,
                                             std::int64_t shard_end) {
  const std::int64_t lo = std::max(begin, shard_begin), hi = std::min(begin + count, shard_end);
  return {lo, std::max<std::int64_t>(0, hi - lo)};
}

}  // namespace

void StageRuntime::parameters_collective(const Op& op, const OpBinding& b, cudaStream_t stream) {
  // The op's group says whose weights: a layer's (the data group) or its experts' (the expert-data group).
  const bool experts = op.group == GroupKind::expert_data;
  // A unit's group: its layout's data group (a per-layer plan's layers each have their own).
  const auto data_of = [&](std::int32_t unit) { return experts ? comms_.expert_data() : layout(unit).data; };
  const auto unit_named = [&](std::int32_t id) -> ParameterUnit& {
    return params_->unit(experts && id >= 0 ? expert_unit_of(id) : id);
  };
  switch (b.action) {
    case Action::grad_reduce: {
      ParameterUnit& unit = unit_named(op.parameter_unit);
      ncclComm_t data = data_of(op.parameter_unit);
      if (op.kind == OpKind::all_reduce)
        TWIN_NCCL_CHECK(ncclAllReduce(unit.grads, unit.grads, unit.padded, ncclBfloat16, ncclSum, data, stream));
      else
        TWIN_NCCL_CHECK(ncclReduceScatter(unit.grads, unit.grads + unit.shard_begin, unit.shard_elements, ncclBfloat16,
                                          ncclSum, data, stream));
      return;
    }
    case Action::param_gather: {
      std::vector<ParameterUnit*> units;
      if (op.parameter_unit != kWholeStage) {
        units.push_back(&unit_named(op.parameter_unit));
      } else {  // every ZeRO-1/2 unit replicated over this op's group (a per-layer plan's: of its size)
        for (ParameterUnit* unit : params_->units()) {
          const lowering::RankShapes& shapes = layout(unit->id).shapes;
          const int replicas = experts ? shapes.expert_data_group : shapes.data_group;
          if ((unit->replicas == GroupKind::expert_data) == experts && replicas == op.group_size &&
              (shapes.zero_stage == 1 || shapes.zero_stage == 2))
            units.push_back(unit);
        }
      }
      TWIN_NCCL_CHECK(ncclGroupStart());
      for (ParameterUnit* unit : units)
        TWIN_NCCL_CHECK(ncclAllGather(unit->params + unit->shard_begin, unit->params, unit->shard_elements,
                                      ncclBfloat16, data_of(unit->id), stream));
      TWIN_NCCL_CHECK(ncclGroupEnd());
      return;
    }
    case Action::grad_norm:
      model_parallel_gradient_fixups(stream);
      return;
    case Action::embedding_grad_sync: {  // tied embeddings: the table's and its copy's gradients summed
      ParameterUnit& unit = params_->unit(op.parameter_unit);
      const WeightTensor& table =
          unit.tensor(op.parameter_unit == kEmbeddingUnit ? OpRole::embedding : OpRole::output_projection);
      // After ZeRO's reduce-scatter only this rank's shard holds gradients; the table and its copy start their
      // units and the units are padded alike (executor/parameters.cpp), so both ends sum the same elements.
      const auto [begin, count] =
          unit.sharded_optimizer ? within(table.offset, table.elements(), unit.shard_begin,
                                          unit.shard_begin + unit.shard_elements)
                                 : std::pair<std::int64_t, std::int64_t>{table.offset, table.elements()};
      if (count > 0)
        TWIN_NCCL_CHECK(ncclAllReduce(unit.grads + begin, unit.grads + begin, count, ncclBfloat16, ncclSum,
                                      comms_.embedding(), stream));
      return;
    }
    default: throw std::logic_error("executor: not a parameter collective");
  }
}

// Sums SP norm-weight gradients over TP, then the squared gradient norm over the data group (the graph's
// grad_norm op), TP and PP (an asymmetric plan: over its pipeline's GPUs at once), and turns it into the clip
// factor.
void StageRuntime::model_parallel_gradient_fixups(cudaStream_t stream) {
  if (fixups_done_) return;
  fixups_done_ = true;
  // Per unit, over its layout's tensor group (a per-layer plan's layers each have their own).
  TWIN_NCCL_CHECK(ncclGroupStart());
  for (ParameterUnit* unit : params_->units()) {
    const UnitLayout& layout = this->layout(unit->id);
    if (!layout.shapes.sp || pipeline_reduction_) continue;  // summed with the other pipelines' already
    for (const WeightTensor& w : unit->tensors) {
      if (!w.tp_replicated) continue;
      const auto [begin, count] = unit->sharded_optimizer
                                      ? within(w.offset, w.elements(), unit->shard_begin,
                                               unit->shard_begin + unit->shard_elements)
                                      : std::pair<std::int64_t, std::int64_t>{w.offset, w.elements()};
      if (count > 0)
        TWIN_NCCL_CHECK(ncclAllReduce(unit->grads + begin, unit->grads + begin, count, ncclBfloat16, ncclSum,
                                      layout.tensor_optimizer, stream));
    }
  }
  TWIN_NCCL_CHECK(ncclGroupEnd());
  // Each data-parallel rank sums its 1/dp of every unit (ZeRO: its shard; plain DP: the same split), and
  // only TP rank 0 counts the weights every TP rank holds: each element once over the stage, whatever each
  // unit's layout, so the sums over the strategy's data and tensor groups (the whole stage) add them all.
  TWIN_CUDA_CHECK(cudaMemsetAsync(grad_sum_squares_, 0, sizeof(float), stream));
  if (part_.optimizer_sharded_over_pipelines)  // its parts hold each element once
    pipeline_reduction_->add_sum_squares(grad_partials_, grad_sum_squares_, stream);
  else
    for (ParameterUnit* unit : params_->units())
      for (const ElementRange& range : gradient_norm_ranges(*unit, layout(unit->id).tp_rank == 0))
        kernels::grad_sum_squares(unit->grads + range.begin, range.count, grad_partials_, grad_sum_squares_, stream);
  if (comms_.norm_over_whole_pipeline()) {  // an asymmetric plan: its stages differ in TP size (ZeRO-1: all GPUs)
    TWIN_NCCL_CHECK(ncclAllReduce(grad_sum_squares_, grad_sum_squares_, 1, ncclFloat32, ncclSum,
                                  comms_.pipeline_for_optimizer(), stream));
    kernels::grad_clip_scale(grad_sum_squares_, options_.max_grad_norm, clip_scale_, stream);
    return;
  }
  if (strategy_.data_parallel_size * strategy_.context_parallel_size > 1)
    TWIN_NCCL_CHECK(ncclAllReduce(grad_sum_squares_, grad_sum_squares_, 1, ncclFloat32, ncclSum, comms_.data(), stream));
  if (strategy_.tensor_model_parallel_size > 1)
    TWIN_NCCL_CHECK(ncclAllReduce(grad_sum_squares_, grad_sum_squares_, 1, ncclFloat32, ncclSum,
                                  comms_.tensor_for_optimizer(), stream));
  if (strategy_.pipeline_model_parallel_size > 1)
    TWIN_NCCL_CHECK(ncclAllReduce(grad_sum_squares_, grad_sum_squares_, 1, ncclFloat32, ncclSum,
                                  comms_.pipeline_for_optimizer(), stream));
  kernels::grad_clip_scale(grad_sum_squares_, options_.max_grad_norm, clip_scale_, stream);
}

void StageRuntime::optimizer(const Op& op, const OpBinding& b, cudaStream_t stream) {
  model_parallel_gradient_fixups(stream);
  kernels::AdamWParams adam;
  adam.lr = options_.learning_rate;
  adam.step = ++step_;
  if (part_.optimizer_sharded_over_pipelines) {  // an asymmetric plan's ZeRO-1
    pipeline_reduction_->step(adam, clip_scale_, stream);
    return;
  }
  for (ParameterUnit* unit : params_->units()) {
    const std::int64_t begin = unit->update_begin();
    launch_op(op, b,
              gpu::OptimizerStep{unit->adam, unit->grads + begin, unit->params + begin, unit->update_elements(), adam,
                                 clip_scale_},
              stream);
  }
}

}  // namespace twin::exec
