// The optimizer's ops (executor/gpu/optimizer_run.hpp): gradient reductions and parameter gathers over each unit's
// data group, the gradient norm over the stage, and the clipped AdamW step.
#include "executor/gpu/optimizer_run.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "executor/gpu/kernel_launch.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {
namespace {

// The part of [begin, begin + count) that lies in this rank's reduced shard [shard_begin, shard_end).
std::pair<std::int64_t, std::int64_t> within(std::int64_t begin, std::int64_t count, std::int64_t shard_begin,
                                             std::int64_t shard_end) {
  const std::int64_t lo = std::max(begin, shard_begin), hi = std::min(begin + count, shard_end);
  return {lo, std::max<std::int64_t>(0, hi - lo)};
}

// The elements of `w` whose gradients this rank holds after the reduction: its shard under ZeRO, else all.
std::pair<std::int64_t, std::int64_t> held(const ParameterUnit& unit, const WeightTensor& w) {
  return unit.sharded_optimizer ? within(w.offset, w.elements(), unit.shard_begin,
                                         unit.shard_begin + unit.shard_elements)
                                : std::pair<std::int64_t, std::int64_t>{w.offset, w.elements()};
}

// NCCL's type of a gradient buffer: the reduction moves the main gradient as it is kept (Megatron all-reduces or
// reduce-scatters its main_grad buffer in its own dtype).
ncclDataType_t nccl_type(const kernels::GradRef& gradient) {
  switch (gradient.type) {
    case kernels::GradType::bf16: return ncclBfloat16;
    case kernels::GradType::f32: return ncclFloat32;
  }
  throw std::logic_error("nccl_type: unknown gradient type");
}

}  // namespace

OptimizerRun::OptimizerRun(const OptimizerStage& stage, TensorStore& tensors) : stage_(stage) {
  grad_partials_ = static_cast<float*>(tensors.static_buffer(kernels::grad_norm_partial_count() * sizeof(float)));
  grad_sum_squares_ = static_cast<float*>(tensors.static_buffer(sizeof(float)));
  clip_scale_ = static_cast<float*>(tensors.static_buffer(sizeof(float)));
}

ParameterUnit& OptimizerRun::unit_named(const Op& op, std::int32_t id) {
  const bool experts = op.group == GroupKind::expert_data;
  return stage_.parameters.unit(experts && id >= 0 ? expert_unit_of(id) : id);
}

// A unit's group: its layout's data group (a per-layer plan's layers each have their own), or the expert-data group.
ncclComm_t OptimizerRun::data_of(const Op& op, std::int32_t unit) const {
  return op.group == GroupKind::expert_data ? stage_.comms.expert_data() : stage_.layout.layout(unit).data;
}

// Under ZeRO >= 2 the whole gradients are this window's only (executor/weight_residency.hpp): reduce-scattered in
// place, then added into the shard the rank keeps, which the step's other reductions add to (zeroed at the step's
// start, so a step of one reduction per unit gets its sum's bits).
void OptimizerRun::grad_reduce(const OpPass& p) {
  ParameterUnit& unit = unit_named(p.op, p.op.parameter_unit);
  ncclComm_t data = data_of(p.op, p.op.parameter_unit);
  const ncclDataType_t type = nccl_type(unit.grads);
  if (p.op.kind == OpKind::all_reduce) {
    TWIN_NCCL_CHECK(ncclAllReduce(unit.grads.data, unit.grads.data, unit.padded, type, ncclSum, data, p.stream));
    return;
  }
  const kernels::GradRef reduced = unit.grads.at(unit.shard_begin);
  TWIN_NCCL_CHECK(ncclReduceScatter(unit.grads.data, reduced.data, unit.shard_elements, type, ncclSum, data, p.stream));
  if (unit.shards_gradients()) {  // bf16 only (the plan check refuses fp32 main gradients under ZeRO >= 2)
    bf16* shard = bf16_gradient(unit.gradient_shard);
    kernels::residual_add(shard, bf16_gradient(reduced), shard, unit.shard_elements, p.stream);
  }
}

void OptimizerRun::param_gather(const OpPass& p) {
  const Op& op = p.op;
  const bool experts = op.group == GroupKind::expert_data;
  std::vector<ParameterUnit*> units;
  if (op.parameter_unit != kWholeStage) {
    units.push_back(&unit_named(op, op.parameter_unit));
  } else {  // every ZeRO-1/2 unit replicated over this op's group (a per-layer plan's: of its size)
    for (ParameterUnit* unit : stage_.parameters.units()) {
      const lowering::RankShapes& shapes = stage_.layout.layout(unit->id).shapes;
      const int replicas = experts ? shapes.expert_data_group : shapes.data_group;
      if ((unit->replicas == GroupKind::expert_data) == experts && replicas == op.group_size &&
          (shapes.zero_stage == 1 || shapes.zero_stage == 2))
        units.push_back(unit);
    }
  }
  // In place, or under ZeRO-3 from the kept shard into the whole buffer this gather's window made.
  TWIN_NCCL_CHECK(ncclGroupStart());
  for (ParameterUnit* unit : units)
    TWIN_NCCL_CHECK(ncclAllGather(unit->weights_at(unit->shard_begin), unit->params, unit->shard_elements,
                                  ncclBfloat16, data_of(op, unit->id), p.stream));
  TWIN_NCCL_CHECK(ncclGroupEnd());
}

void OptimizerRun::grad_norm(const OpPass& p) { model_parallel_gradient_fixups(p.stream); }

// Tied embeddings: the table's and its copy's gradients summed. After ZeRO's reduce-scatter only this rank's shard
// holds gradients; the table and its copy start their units and the units are padded alike
// (executor/parameters.cpp), so both ends sum the same elements.
void OptimizerRun::embedding_grad_sync(const OpPass& p) {
  ParameterUnit& unit = stage_.parameters.unit(p.op.parameter_unit);
  const WeightTensor& table =
      unit.tensor(p.op.parameter_unit == kEmbeddingUnit ? OpRole::embedding : OpRole::output_projection);
  const auto [begin, count] = held(unit, table);
  if (count > 0)
    TWIN_NCCL_CHECK(ncclAllReduce(unit.gradients_at(begin).data, unit.gradients_at(begin).data, count,
                                  nccl_type(unit.grads), ncclSum, stage_.comms.embedding(), p.stream));
}

void OptimizerRun::sum_replicated_norm_gradients(cudaStream_t stream) {
  // Per unit, over its layout's tensor group (a per-layer plan's layers each have their own): under SP every
  // replicated weight's, without it those partial per TP rank whatever SP (QK-norm's).
  TWIN_NCCL_CHECK(ncclGroupStart());
  for (ParameterUnit* unit : stage_.parameters.units()) {
    const UnitLayout& layout = stage_.layout.layout(unit->id);
    if (layout.shapes.tp == 1 || stage_.pipeline_reduction) continue;  // summed with the other pipelines' already
    for (const WeightTensor& w : unit->tensors) {
      if (!w.tp_replicated || !(layout.shapes.sp || w.tp_partial_gradient)) continue;
      const auto [begin, count] = held(*unit, w);
      if (count > 0)
        TWIN_NCCL_CHECK(ncclAllReduce(unit->gradients_at(begin).data, unit->gradients_at(begin).data, count,
                                      nccl_type(unit->grads), ncclSum, layout.tensor_optimizer, stream));
    }
  }
  TWIN_NCCL_CHECK(ncclGroupEnd());
}

void OptimizerRun::model_parallel_gradient_fixups(cudaStream_t stream) {
  if (fixups_done_) return;
  fixups_done_ = true;
  sum_replicated_norm_gradients(stream);
  // Each data-parallel rank sums its 1/dp of every unit (ZeRO: its shard; plain DP: the same split), and only TP
  // rank 0 counts the weights every TP rank holds: each element once over the stage, whatever each unit's layout,
  // so the sums over the strategy's data and tensor groups (the whole stage) add them all.
  TWIN_CUDA_CHECK(cudaMemsetAsync(grad_sum_squares_, 0, sizeof(float), stream));
  if (stage_.sharded_over_pipelines)  // its parts hold each element once
    stage_.pipeline_reduction->add_sum_squares(grad_partials_, grad_sum_squares_, stream);
  else
    for (ParameterUnit* unit : stage_.parameters.units())
      for (const ElementRange& range : gradient_norm_ranges(*unit, stage_.layout.layout(unit->id).tp_rank == 0))
        kernels::grad_sum_squares(unit->gradients_at(range.begin), range.count, grad_partials_, grad_sum_squares_,
                                  stream);
  const auto sum_over = [&](ncclComm_t group) {
    TWIN_NCCL_CHECK(ncclAllReduce(grad_sum_squares_, grad_sum_squares_, 1, ncclFloat32, ncclSum, group, stream));
  };
  const Strategy& strategy = stage_.layout.strategy();
  Communicators& comms = stage_.comms;
  if (comms.norm_over_whole_pipeline()) {  // an asymmetric plan: its stages differ in TP size (ZeRO-1: all GPUs)
    sum_over(comms.pipeline_for_optimizer());
  } else {
    if (strategy.data_parallel_size * strategy.context_parallel_size > 1) sum_over(comms.data());
    if (strategy.tensor_model_parallel_size > 1) sum_over(comms.tensor_for_optimizer());
    if (strategy.pipeline_model_parallel_size > 1) sum_over(comms.pipeline_for_optimizer());
  }
  if (stage_.recipe.clip_grad > 0)
    kernels::grad_clip_scale(grad_sum_squares_, static_cast<float>(stage_.recipe.clip_grad), clip_scale_, stream);
}

std::optional<double> OptimizerRun::last_grad_norm() const {
  if (!fixups_done_) return std::nullopt;
  float sum_squares = 0;
  TWIN_CUDA_CHECK(cudaMemcpy(&sum_squares, grad_sum_squares_, sizeof(float), cudaMemcpyDeviceToHost));
  return std::sqrt(static_cast<double>(sum_squares));
}

void OptimizerRun::optimizer_step(const OpPass& p) {
  model_parallel_gradient_fixups(p.stream);
  kernels::AdamWParams adam;
  learning_rate_ = learning_rate_at(stage_.recipe, step_, stage_.train_iters);  // Megatron's, before its step
  adam.lr = static_cast<float>(learning_rate_);
  adam.step = ++step_;
  const float* clip_scale = stage_.recipe.clip_grad > 0 ? clip_scale_ : nullptr;  // nullptr: AdamW scales by 1
  if (stage_.sharded_over_pipelines) {  // an asymmetric plan's ZeRO-1
    stage_.pipeline_reduction->step(adam, clip_scale, p.stream);
    return;
  }
  for (ParameterUnit* unit : stage_.parameters.units()) {
    const std::int64_t begin = unit->update_begin();
    // The op's price and its calibration read a gradient of the op's type: the buffer must be of it.
    if (unit->grads.element_bytes() != static_cast<std::size_t>(p.op.main_gradient_bytes))
      throw std::logic_error(fmt::format("executor: optimizer_step reads a {}-byte main gradient, its op says {}",
                                         unit->grads.element_bytes(), int(p.op.main_gradient_bytes)));
    launch_op(p.op, p.binding,
              gpu::OptimizerStep{unit->adam, unit->gradients_at(begin), unit->weights_at(begin),
                                 unit->update_elements(), adam, clip_scale},
              p.stream);
  }
}

}  // namespace twin::exec
