// Lowering of a per-layer plan: one rank class per stage, passes in 1F1B or GPipe order. Each unit is
// emitted by an emitter bound to its own shapes (TP or Ulysses group, data group, ZeRO stage,
// recompute), continuing the previous unit's chain. Consecutive units of different layouts need no op
// between them: every layout holds the same rows on each GPU (per_layer.hpp).
// ZeRO-3 gathers one unit ahead, gradient reduction as each unit's last backward ends, and the optimizer
// phase follow StageLowering, per unit's data group.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "strategies/per_layer/per_layer_lowering.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/schedule.hpp"

namespace twin {
namespace per_layer {
using lowering::Emitter;
using lowering::kNoOp;
using lowering::Unit;

namespace {

std::int32_t parameter_unit_of(const Unit& u) {
  if (u.kind == Unit::embedding_unit) return kEmbeddingUnit;
  if (u.kind == Unit::head_unit) return kHeadUnit;
  return u.layer;
}

Op parameter_collective(OpKind kind, OpRole role, int group_size, std::int64_t bytes, std::int32_t unit,
                        GroupKind group = GroupKind::data) {
  Op op = Emitter::collective(kind, role, Stream::dp_comm, group, group_size, bytes);
  op.parameter_unit = unit;
  return op;
}

Strategy layout_strategy(int tp, int dp, int pp) {
  Strategy st;
  st.tensor_model_parallel_size = tp;
  st.data_parallel_size = dp;
  st.pipeline_model_parallel_size = pp;
  return st;
}

void add_tensor_span(RankClass& rc, const Scenario& scenario, int pipeline_stages, int stage, int gpus, int group) {
  if (rc.span_of(GroupKind::tensor, group)) return;
  rc.extra_spans.emplace_back(
      GroupKind::tensor, group_spans(layout_strategy(group, gpus / group, pipeline_stages), scenario.cluster,
                                     stage)[static_cast<int>(GroupKind::tensor)]);
}

}  // namespace

void set_spans(RankClass& rc, const Scenario& scenario, const PerLayerPlan& plan, int stage, int gpus,
               const std::vector<LayerStrategy>& strategies) {
  const int pp = plan.pipeline_stages;
  const LayerLayout& home = strategies.front().layout;
  rc.spans = group_spans(layout_strategy(home.group, gpus / home.group, pp), scenario.cluster, stage);
  rc.spans[static_cast<int>(GroupKind::data)] =
      group_spans(layout_strategy(gpus / data_group_of(home, gpus), data_group_of(home, gpus), pp), scenario.cluster,
                  stage)[static_cast<int>(GroupKind::data)];
  rc.extra_spans.clear();
  for (const LayerStrategy& s : strategies) {
    add_tensor_span(rc, scenario, pp, stage, gpus, s.layout.group);
    const int data_group = data_group_of(s.layout, gpus);
    const GroupSpan span =
        group_spans(layout_strategy(gpus / data_group, data_group, pp), scenario.cluster, stage)[static_cast<int>(GroupKind::data)];
    if (!rc.span_of(GroupKind::data, span.size)) rc.extra_spans.emplace_back(GroupKind::data, span);
  }
}

PerLayerStage::PerLayerStage(const Scenario& scenario, const PerLayerPlan& plan, int stage, int gpus, RankClass& rc,
                             bool with_edges)
    : scenario_(scenario), plan_(plan), stage_(stage), last_stage_(plan.pipeline_stages - 1),
      tokens_(static_cast<std::int64_t>(plan.stage_micro_batch) * scenario.training.seq_length / gpus), rc_(rc) {
  const ModelConfig& m = scenario.model;
  const int first = plan.first_layer(stage), count = plan.stage_layers[stage];
  const int smb = plan.stage_micro_batch;
  const LayerStrategy& first_s = plan.layers[first];
  const LayerStrategy& last_s = plan.layers[first + count - 1];
  // Each unit's shapes, weights' TP and data group as twin execute runs it (stage_unit_execution).
  const auto unit = [&](lowering::Unit unit, const LayerStrategy& s, bool edge, auto parameters_at_tp) {
    const UnitExecution e = stage_unit_execution(scenario, s, edge, gpus, smb);
    const int tp = e.weights.tensor_model_parallel_size;
    units_.push_back({unit, s, e.shapes, parameters_at_tp(tp), e.weights.data_parallel_size});
  };
  if (with_edges && stage == 0)
    unit({Unit::embedding_unit}, first_s, true, [&](int tp) { return embedding_parameters_per_rank(m, tp); });
  for (int layer = first; layer < first + count; ++layer)
    unit({Unit::layer_unit, layer}, plan.layers[layer], false,
         [&](int tp) { return layer_parameters_per_rank(m, layer, tp, 1).dense; });
  if (with_edges && stage == last_stage_)
    unit({Unit::head_unit}, last_s, true, [&](int tp) { return output_parameters_per_rank(m, tp, stage == 0); });
  set_spans(rc, scenario, plan, stage, gpus, {plan.layers.begin() + first, plan.layers.begin() + first + count});
}

Emitter PerLayerStage::emitter(const lowering::RankShapes& shapes) {
  Emitter e(rc_, shapes);
  e.begin_pass(phase_, micro_batch_, 0);
  e.set_layer(layer_);
  e.chain = chain_;
  e.pending_wait = pending_wait_;
  e.loss_complete = loss_complete_;
  return e;
}

void PerLayerStage::take(const Emitter& e) {
  chain_ = e.chain;
  pending_wait_ = e.pending_wait;
  loss_complete_ = e.loss_complete;
}

OpIndex PerLayerStage::emit(Op op, int layer) {
  layer_ = layer;
  Emitter e = emitter(units_.front().shapes);
  const OpIndex index = e.emit(op);
  take(e);
  return index;
}

OpIndex PerLayerStage::emit_after(Op op, OpIndex after) {
  Emitter e = emitter(units_.front().shapes);
  return e.emit_after(op, after);
}

Op PerLayerStage::p2p(OpKind kind, OpRole role, int peer_stage, std::int64_t tag) const {
  Op op = Emitter::collective(kind, role, kind == OpKind::send ? Stream::pp_send : Stream::pp_recv,
                              GroupKind::pipeline, plan_.pipeline_stages, tokens_ * scenario_.model.hidden_size * 2);
  op.peer = peer_stage;
  op.p2p_tag = tag;
  op.transfer = role == OpRole::pipeline_activation ? Transfer::activation : Transfer::gradient;
  return op;
}

OpIndex PerLayerStage::gather_weights(const UnitPlan& u, OpIndex after) {
  if (u.strategy.zero_stage < 3 || u.data_group <= 1 || u.parameters <= 0) return kNoOp;
  return emit_after(parameter_collective(OpKind::all_gather, OpRole::param_gather, u.data_group, u.parameters * 2,
                                         parameter_unit_of(u.unit)),
                    after);
}

bool PerLayerStage::gathers_ahead(const UnitPlan& u) const {
  return scenario_.framework.overlap_param_gather && (u.strategy.zero_stage == 1 || u.strategy.zero_stage == 2) &&
         u.data_group > 1 && u.parameters > 0;
}

void PerLayerStage::gather_updated_weights_ahead(int first_micro_batch) {
  phase_ = Phase::forward;
  micro_batch_ = first_micro_batch;
  layer_ = -1;
  for (const UnitPlan& u : units_)
    if (gathers_ahead(u))
      gathered_ahead_[parameter_unit_of(u.unit)] =
          emit_after(parameter_collective(OpKind::all_gather, OpRole::param_gather, u.data_group, u.parameters * 2,
                                          parameter_unit_of(u.unit)),
                     kNoOp);
}

void PerLayerStage::reduce_gradients(const UnitPlan& u, OpIndex after) {
  if (u.data_group <= 1 || u.parameters <= 0) return;
  if (!scenario_.framework.overlap_grad_reduce && phase_ != Phase::optimizer) {
    deferred_reductions_.push_back(&u);
    return;
  }
  const OpKind kind = u.strategy.zero_stage == 0 ? OpKind::all_reduce : OpKind::reduce_scatter;
  emit_after(parameter_collective(kind, OpRole::grad_reduce, u.data_group, u.parameters * 2, parameter_unit_of(u.unit)),
             after);
}

// The reductions overlap_grad_reduce off left for later, after the last compute op so far: those of layers that
// reduce in every micro-batch (after each backward pass), or all of them (after the whole backward).
void PerLayerStage::emit_deferred_reductions(bool every_micro_batch_only) {
  const OpIndex last_compute = last_on(Stream::compute);
  std::vector<const UnitPlan*> later;
  for (const UnitPlan* u : deferred_reductions_) {
    if (every_micro_batch_only && !u->shapes.reduces_every_micro_batch) {
      later.push_back(u);
      continue;
    }
    emit_after(parameter_collective(u->strategy.zero_stage == 0 ? OpKind::all_reduce : OpKind::reduce_scatter,
                                    OpRole::grad_reduce, u->data_group, u->parameters * 2, parameter_unit_of(u->unit)),
               last_compute);
  }
  deferred_reductions_ = std::move(later);
}

void PerLayerStage::run_units(bool forward, bool reduce, bool last_of_stage) {
  std::vector<const UnitPlan*> list;
  for (const UnitPlan& u : units_) list.push_back(&u);
  if (!forward) std::reverse(list.begin(), list.end());
  OpIndex next_gather = gather_weights(*list.front(), kNoOp);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const UnitPlan& u = *list[i];
    OpIndex this_gather = next_gather;
    if (i + 1 < list.size()) next_gather = gather_weights(*list[i + 1], chain_);
    if (auto ahead = gathered_ahead_.find(parameter_unit_of(u.unit)); forward && ahead != gathered_ahead_.end()) {
      this_gather = ahead->second;
      gathered_ahead_.erase(ahead);
    }
    pending_wait_ = this_gather;
    Emitter e = emitter(u.shapes);
    if (u.unit.kind == Unit::layer_unit && u.strategy.layout.ulysses)
      forward ? emit_ulysses_layer_forward(e, scenario_.model, u.unit.layer)
              : emit_ulysses_layer_backward(e, scenario_.model, u.unit.layer);
    else
      lowering::emit_unit(e, scenario_.model, u.unit, forward);
    take(e);
    layer_ = u.unit.kind == Unit::layer_unit ? u.unit.layer : -1;
    // ZeRO-2/3 layers reduce in every micro-batch's backward (lowering_emitter.hpp reduces_every_micro_batch).
    if (reduce && (last_of_stage || u.shapes.reduces_every_micro_batch)) reduce_gradients(u, chain_);
  }
}

void PerLayerStage::forward_pass(const ScheduleStep& step) {
  phase_ = Phase::forward;
  micro_batch_ = step.micro_batch;
  layer_ = -1;
  chain_ = kNoOp;
  const auto tag = [&](int boundary) { return (static_cast<std::int64_t>(step.micro_batch) * (last_stage_ + 1) + boundary) * 2; };
  if (stage_ > 0) emit(p2p(OpKind::recv, OpRole::pipeline_activation, stage_ - 1, tag(stage_ - 1)), -1);
  run_units(true, false, false);
  layer_ = -1;
  if (stage_ < last_stage_) emit(p2p(OpKind::send, OpRole::pipeline_activation, stage_ + 1, tag(stage_)), -1);
}

void PerLayerStage::backward_pass(const ScheduleStep& step, bool reduce, bool last_of_stage) {
  phase_ = Phase::backward;
  micro_batch_ = step.micro_batch;
  layer_ = -1;
  chain_ = kNoOp;
  const auto tag = [&](int boundary) {
    return (static_cast<std::int64_t>(step.micro_batch) * (last_stage_ + 1) + boundary) * 2 + 1;
  };
  if (stage_ < last_stage_) emit(p2p(OpKind::recv, OpRole::pipeline_gradient, stage_ + 1, tag(stage_)), -1);
  run_units(false, reduce, last_of_stage);
  layer_ = -1;
  emit_deferred_reductions(true);
  if (stage_ > 0) emit(p2p(OpKind::send, OpRole::pipeline_gradient, stage_ - 1, tag(stage_ - 1)), -1);
}

void PerLayerStage::run(const std::vector<ScheduleStep>& order, bool reduce, bool optimizer) {
  int last_backward = -1;
  for (int i = 0; i < static_cast<int>(order.size()); ++i)
    if (!order[i].forward) last_backward = i;
  if (optimizer && !order.empty()) gather_updated_weights_ahead(order.front().micro_batch);
  for (int i = 0; i < static_cast<int>(order.size()); ++i)
    order[i].forward ? forward_pass(order[i]) : backward_pass(order[i], reduce, i == last_backward);
  if (optimizer) optimizer_phase();
}

OpIndex PerLayerStage::last_on(Stream stream) const { return rc_.last_on(stream); }

// As StageLowering::optimizer_phase, with one sharded step over every unit's shard and, for ZeRO-1/2,
// one weight gather per data group.
void PerLayerStage::optimizer_phase() {
  const OpIndex last_compute = last_on(Stream::compute);
  phase_ = Phase::backward;  // deferred reductions (overlap_grad_reduce off): after the whole backward
  micro_batch_ = -1;
  layer_ = -1;
  emit_deferred_reductions(false);
  phase_ = Phase::optimizer;
  const ModelConfig& m = scenario_.model;
  const bool holds_embedding = stage_ == 0, holds_output = stage_ == last_stage_;
  if (!m.untie_embeddings_and_output_weights && holds_embedding != holds_output) {
    const UnitPlan& edge = holds_embedding ? units_.front() : units_.back();
    const int tp = edge.shapes.tp;
    emit_after(parameter_collective(OpKind::all_reduce, OpRole::embedding_grad_sync, 2,
                                    padded_vocab_size(m, tp) / tp * m.hidden_size * 2,
                                    holds_embedding ? kEmbeddingUnit : kHeadUnit, GroupKind::embedding),
               last_compute);
  }
  const int norm_group = units_.front().data_group;
  if (norm_group > 1)
    emit_after(Emitter::collective(OpKind::all_reduce, OpRole::grad_norm, Stream::dp_comm, GroupKind::data, norm_group, 8),
               last_compute);
  std::int64_t elements = 0;
  std::map<int, std::int64_t> gathered;  // data group -> parameters to gather after the step
  std::map<int, std::int64_t> held;      // data group -> parameters of ZeRO-1+ units, sharded together
  for (const UnitPlan& u : units_) {
    if (u.strategy.zero_stage >= 1)
      held[u.data_group] += u.parameters;
    else
      elements += u.parameters;
    if ((u.strategy.zero_stage == 1 || u.strategy.zero_stage == 2) && !gathers_ahead(u))
      gathered[u.data_group] += u.parameters;
  }
  for (const auto& [group, n] : held) elements += (n + group - 1) / group;
  const Op step = lowering::Emitter::optimizer_step(elements, scenario_.training.optimizer_precision,
                                                    main_gradient_bytes(scenario_.framework));
  const OpIndex gradients_ready = last_on(Stream::dp_comm);
  chain_ = last_compute;
  pending_wait_ = kNoOp;
  const OpIndex update = emit(step, -1);
  if (gradients_ready != kNoOp) rc_.add_dependency(gradients_ready, update);
  for (const auto& [group, n] : gathered)
    if (group > 1 && n > 0)
      emit_after(parameter_collective(OpKind::all_gather, OpRole::param_gather, group, n * 2, kWholeStage), update);
}

}  // namespace per_layer

IterationGraph lower_per_layer_plan(const Scenario& scenario, const PerLayerPlan& plan) {
  const int pp = plan.pipeline_stages, gpus = stage_gpus(scenario, plan);
  const auto orders = pipeline_schedule(plan.schedule, pp, plan.num_micro_batches, 1);
  IterationGraph graph;
  graph.classes.resize(static_cast<std::size_t>(pp));
  for (int stage = 0; stage < pp; ++stage) {
    RankClass& rc = graph.classes[stage];
    rc.index = stage;
    rc.pipeline = 0;
    rc.stage = stage;
    rc.num_ranks = gpus;
    rc.first_rank = stage * gpus;
    rc.node_group = scenario.cluster.node_group_index_of_rank(rc.first_rank);
    rc.label = "stage " + std::to_string(stage);
    per_layer::PerLayerStage lowering(scenario, plan, stage, gpus, rc);
    lowering.run(orders[stage]);
  }
  return graph;
}

}  // namespace twin
