// Lowering and simulation of an asymmetric plan. Each (pipeline, stage) is one rank class on its own GPU
// kind, lowered with the layer, embedding and output ops of the uniform lowering (lowering_emitter.hpp)
// at its own TP size, in its pipeline's schedule order. Stages of one pipeline exchange activations
// and gradients by send/recv (each side its own bytes per GPU when TP sizes differ and SP shards them).
// The cross-pipeline gradient ring is send/recv too: sends on the data-parallel stream, receives on the
// pipeline-receive stream (idle by then: the last backward pass has posted its last pipeline receive),
// so each step starts when both neighbours are ready and runs on the links between their GPUs.
// Segments are reduced highest first on every class, one consistent order, so the rings never wait on
// each other in a cycle. The reduction's additions are not priced (a few bytes per byte moved).
#include <algorithm>
#include <set>

#include "sim/simulate.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/flops.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/schedule.hpp"

namespace twin {
namespace {

using lowering::Emitter;
using lowering::kNoOp;
using lowering::RankShapes;

GroupSpan span_of_ranks(const Cluster& cluster, const std::vector<int>& ranks) {
  std::set<int> nodes;
  int home = 0;
  for (int r : ranks) {
    nodes.insert(cluster.node_of_rank(r));
    home += cluster.node_of_rank(r) == cluster.node_of_rank(ranks.front()) ? 1 : 0;
  }
  return {static_cast<int>(ranks.size()), home, static_cast<int>(nodes.size())};
}

// The segments one class takes part in, with its ring neighbours' classes.
struct ClassSegment {
  int segment = 0;
  int first_unit = 0;
  Bytes shard_bytes = 0;  // this class's gradient bytes per GPU
  int next_class = 0, previous_class = 0;
};

class AsymmetricStageLowering {
 public:
  AsymmetricStageLowering(const Scenario& scenario, const Strategy& shared, const AsymmetricPipeline& pipeline,
                          int stage, int pipelines, int class_offset, const std::vector<ClassSegment>& segments,
                          RankClass& rc)
      : scenario_(scenario), shared_(shared), pipeline_(pipeline), stage_(stage), pipelines_(pipelines),
        class_offset_(class_offset), segments_(segments), stages_(static_cast<int>(pipeline.stages.size())),
        shapes_(shapes_of(scenario, stage_strategy(shared, pipeline, stage), pipeline.stages[stage].num_layers)),
        units_(stage_units(scenario.model, pipeline)[stage]), e_(rc, shapes_) {}

  void run() {
    const auto orders = pipeline_schedule(shared_.schedule, stages_, pipeline_.num_micro_batches, 1);
    const std::vector<ScheduleStep>& order = orders[stage_];
    int last_backward = -1;
    for (int i = 0; i < static_cast<int>(order.size()); ++i)
      if (!order[i].forward) last_backward = i;
    for (int i = 0; i < static_cast<int>(order.size()); ++i) pass(order[i], i == last_backward);
    optimizer_phase();
  }

 private:
  static RankShapes shapes_of(const Scenario& scenario, const Strategy& s, int layers) {
    RankShapes shapes = lowering::rank_shapes(scenario, s);
    shapes.layers_per_chunk = layers;
    return shapes;
  }

  Op p2p(OpKind kind, OpRole role, int peer_stage, int micro_batch, int boundary, bool backward) const {
    Op op = Emitter::collective(kind, role, kind == OpKind::send ? Stream::pp_send : Stream::pp_recv,
                                GroupKind::pipeline, stages_, shapes_.tokens_local * shapes_.h * 2);
    op.peer = class_offset_ + peer_stage;
    op.p2p_tag = (static_cast<std::int64_t>(micro_batch) * stages_ + boundary) * 2 + (backward ? 1 : 0);
    op.transfer = role == OpRole::pipeline_activation ? Transfer::activation : Transfer::gradient;
    return op;
  }

  void emit_unit(int unit, bool forward) {
    if (unit < 0) forward ? lowering::emit_embedding_forward(e_) : lowering::emit_embedding_backward(e_);
    else if (unit >= scenario_.model.num_layers) forward ? lowering::emit_head_forward(e_) : lowering::emit_head_backward(e_);
    else forward ? lowering::emit_layer_forward(e_, scenario_.model, unit) : lowering::emit_layer_backward(e_, scenario_.model, unit);
  }

  void pass(const ScheduleStep& step, bool last_backward) {
    e_.begin_pass(step.forward ? Phase::forward : Phase::backward, step.micro_batch, 0);
    e_.chain = kNoOp;
    const int mb = step.micro_batch;
    if (step.forward) {
      if (stage_ > 0) e_.emit(p2p(OpKind::recv, OpRole::pipeline_activation, stage_ - 1, mb, stage_ - 1, false));
      for (int unit = units_.first_unit; unit < units_.end_unit; ++unit) emit_unit(unit, true);
      e_.set_layer(-1);
      if (stage_ < stages_ - 1) e_.emit(p2p(OpKind::send, OpRole::pipeline_activation, stage_ + 1, mb, stage_, false));
      return;
    }
    if (stage_ < stages_ - 1) e_.emit(p2p(OpKind::recv, OpRole::pipeline_gradient, stage_ + 1, mb, stage_, true));
    for (int unit = units_.end_unit - 1; unit >= units_.first_unit; --unit) {
      emit_unit(unit, false);
      if (!last_backward) continue;
      for (const ClassSegment& segment : segments_)
        if (segment.first_unit == unit) reduce_segment(segment, shared_.zero_stage >= 1);
    }
    e_.set_layer(-1);
    if (stage_ > 0) e_.emit(p2p(OpKind::send, OpRole::pipeline_gradient, stage_ - 1, mb, stage_ - 1, true));
  }

  OpIndex last_on(Stream stream) { return e_.rank_class().last_on(stream); }

  Op ring_op(OpKind kind, OpRole role, const ClassSegment& segment, int step) const {
    Op op = Emitter::collective(kind, role, kind == OpKind::send ? Stream::dp_comm : Stream::pp_recv, GroupKind::data,
                                pipelines_, ring_step_bytes(segment.shard_bytes, pipelines_));
    op.peer = kind == OpKind::send ? segment.next_class : segment.previous_class;
    op.p2p_tag = ring_tag(segment.segment, step, pipelines_);
    // The reduce-scatter half's P - 1 steps, then the all-gather half's, of reduced gradients or updated weights.
    const bool scatter = step < pipelines_ - 1;
    op.transfer = scatter                  ? Transfer::pipelines_reduce
                  : shared_.zero_stage >= 1 ? Transfer::pipelines_gather_weights
                                            : Transfer::pipelines_gather_gradients;
    op.ring_segment = static_cast<std::int16_t>(segment.segment);
    op.ring_step = static_cast<std::int16_t>(scatter ? step : step - (pipelines_ - 1));
    return op;
  }

  // Ring steps [first_step, end_step) of a segment; step 0 waits for the gradients (the compute so far).
  void ring_steps(const ClassSegment& segment, int first_step, int end_step, OpIndex ready) {
    OpIndex previous_recv = kNoOp;
    for (int step = first_step; step < end_step; ++step) {
      const OpRole role = step < pipelines_ - 1 ? OpRole::grad_reduce
                          : shared_.zero_stage >= 1 ? OpRole::param_gather : OpRole::grad_reduce;
      const OpIndex send = e_.emit_after(ring_op(OpKind::send, role, segment, step), ready);
      e_.depend(previous_recv, send);
      previous_recv = e_.emit_after(ring_op(OpKind::recv, role, segment, step), kNoOp);
      ready = kNoOp;
    }
  }

  void reduce_segment(const ClassSegment& segment, bool scatter_only) {
    if (pipelines_ < 2 || segment.shard_bytes <= 0) return;
    const OpIndex ready = last_on(Stream::compute);
    ring_steps(segment, 0, scatter_only ? pipelines_ - 1 : 2 * (pipelines_ - 1), ready);
  }

  // The optimizer step on this stage's parameters (ZeRO-1: its 1/P shard, then the all-gather half of
  // every ring with the updated weights).
  void optimizer_phase() {
    e_.begin_pass(Phase::optimizer, -1, 0);
    const OpIndex last_compute = last_on(Stream::compute);
    const OpIndex sent = last_on(Stream::dp_comm);
    const OpIndex received = last_on(Stream::pp_recv);
    const std::int64_t parameters = stage_parameters(scenario_.model, pipeline_, stage_);
    const Op step = Emitter::optimizer_step(
        shared_.zero_stage >= 1 ? (parameters + pipelines_ - 1) / pipelines_ : parameters,
        scenario_.training.optimizer_precision, main_gradient_bytes(scenario_.framework));
    e_.chain = last_compute;
    const OpIndex update = e_.emit(step);
    e_.depend(sent, update);
    e_.depend(received, update);
    if (shared_.zero_stage >= 1 && pipelines_ > 1)
      for (auto it = segments_.rbegin(); it != segments_.rend(); ++it) ring_steps(*it, pipelines_ - 1, 2 * (pipelines_ - 1), update);
  }

  const Scenario& scenario_;
  const Strategy& shared_;
  const AsymmetricPipeline& pipeline_;
  const int stage_, pipelines_, class_offset_;
  const std::vector<ClassSegment>& segments_;
  const int stages_;
  const RankShapes shapes_;
  const StageUnits units_;
  Emitter e_;
};

}  // namespace

IterationGraph lower_asymmetric_plan(const Scenario& scenario, const Strategy& shared,
                                     const std::vector<AsymmetricPipeline>& plan) {
  const Cluster& cluster = scenario.cluster;
  const int pipelines = static_cast<int>(plan.size());
  std::vector<int> offset(plan.size() + 1, 0);
  for (int p = 0; p < pipelines; ++p) offset[p + 1] = offset[p] + static_cast<int>(plan[p].stages.size());

  // Every class's part in every gradient segment (classes hold segments in model order).
  std::vector<std::vector<ClassSegment>> class_segments(static_cast<std::size_t>(offset.back()));
  const std::vector<GradientSegment> segments = gradient_segments(scenario.model, plan);
  for (int g = 0; g < static_cast<int>(segments.size()); ++g) {
    const GradientSegment& segment = segments[g];
    for (int p = 0; p < pipelines; ++p) {
      const int stage = segment.stage_of_pipeline[p];
      const int next = (p + 1) % pipelines, previous = (p + pipelines - 1) % pipelines;
      class_segments[offset[p] + stage].push_back(
          {g, segment.first_unit,
           segment_gradient_bytes(scenario.model, segment, plan[p].stages[stage].tensor_model_parallel_size,
                                  plan[p].stages.size() == 1),
           offset[next] + segment.stage_of_pipeline[next], offset[previous] + segment.stage_of_pipeline[previous]});
    }
  }

  IterationGraph graph;
  graph.classes.resize(static_cast<std::size_t>(offset.back()));
  for (int p = 0; p < pipelines; ++p) {
    std::vector<int> stage_firsts;
    for (const AsymmetricStage& stage : plan[p].stages) stage_firsts.push_back(stage.devices.front());
    for (int s = 0; s < static_cast<int>(plan[p].stages.size()); ++s) {
      const AsymmetricStage& stage = plan[p].stages[s];
      RankClass& rc = graph.classes[offset[p] + s];
      rc.index = offset[p] + s;
      rc.pipeline = p;
      rc.stage = s;
      rc.num_ranks = static_cast<int>(stage.devices.size());
      rc.first_rank = stage.devices.front();
      rc.node_group = cluster.node_group_index_of_rank(rc.first_rank);
      rc.spans[static_cast<int>(GroupKind::none)] = span_of_ranks(cluster, {rc.first_rank});
      rc.spans[static_cast<int>(GroupKind::tensor)] = span_of_ranks(cluster, stage.devices);
      rc.spans[static_cast<int>(GroupKind::pipeline)] = span_of_ranks(cluster, stage_firsts);
      std::vector<int> replicas;
      for (const GradientSegment& segment : segments)
        if (segment.first_unit == stage_units(scenario.model, plan[p])[s].first_unit) {
          for (int q = 0; q < pipelines; ++q)
            replicas.push_back(plan[q].stages[segment.stage_of_pipeline[q]].devices.front());
          break;
        }
      if (!replicas.empty()) rc.spans[static_cast<int>(GroupKind::data)] = span_of_ranks(cluster, replicas);
      rc.label = pipelines > 1 ? "pipeline " + std::to_string(p) + " stage " + std::to_string(s)
                               : "stage " + std::to_string(s);
      AsymmetricStageLowering(scenario, shared, plan[p], s, pipelines, offset[p], class_segments[offset[p] + s], rc)
          .run();
    }
  }
  return graph;
}

Throughput asymmetric_throughput(const Scenario& scenario, const Strategy& shared,
                                 const std::vector<AsymmetricPipeline>& plan, double iteration_s) {
  double peak_flops = 0;
  for (const AsymmetricPipeline& p : plan)
    for (const AsymmetricStage& s : p.stages)
      peak_flops += static_cast<double>(s.devices.size()) *
                    gpu_peak_flops(scenario, scenario.cluster.group_of_rank(s.devices.front()).gpu);
  Throughput t;
  t.iteration_s = iteration_s;
  if (iteration_s > 0) {
    t.tokens_per_s = static_cast<double>(scenario.training.global_batch_size) * scenario.training.seq_length / iteration_s;
    t.mfu = model_flops_per_iteration(scenario) / (iteration_s * peak_flops);
    t.hfu = hardware_flops_per_iteration(scenario, shared.recompute) / (iteration_s * peak_flops);
  }
  return t;
}

Candidate evaluate_asymmetric_plan(const Scenario& scenario, const Profile& profile, const Strategy& shared,
                                   const std::vector<AsymmetricPipeline>& plan, bool record_op_timings,
                                   IterationGraph* graph_out) {
  Candidate candidate;
  // The home strategy: pipeline 0's first stage as a uniform strategy with the pipelines as replicas.
  candidate.strategy = stage_strategy(shared, plan.front(), 0);
  candidate.strategy.data_parallel_size = static_cast<int>(plan.size());
  candidate.strategy.zero_stage = shared.zero_stage;
  std::int64_t micro_batches = 0;
  for (const AsymmetricPipeline& pipeline : plan) micro_batches += pipeline.num_micro_batches;
  const auto pipelines = static_cast<std::int64_t>(plan.size());
  if (auto too_many = asymmetric_too_many_ops_reason(scenario, shared, micro_batches, pipelines))
    candidate.infeasible_reason = *too_many;
  else candidate.infeasible_reason = asymmetric_out_of_memory_reason(scenario, shared, plan, candidate.memory);
  candidate.feasible = candidate.infeasible_reason.empty();
  if (candidate.feasible) {
    IterationGraph graph = lower_asymmetric_plan(scenario, shared, plan);
    candidate.result = simulate_iteration(graph, scenario.cluster, profile, SimOptions{record_op_timings});
    candidate.throughput = asymmetric_throughput(scenario, shared, plan, to_seconds(candidate.result.iteration_ns));
    if (graph_out) *graph_out = std::move(graph);
  }
  candidate.plan = std::make_shared<AsymmetricPlan>(asymmetric_plan(scenario, shared, plan));
  return candidate;
}

}  // namespace twin
