// Internal to the per-layer family: the shapes a GPU sees under a layer strategy, the Ulysses layer's
// ops, and the lowering of one pipeline stage whose units each have their own layout. The search uses
// the same stage lowering on one-layer graphs to price layer strategies.
#pragma once
#include <map>
#include <vector>

#include "strategies/lowering_stage.hpp"
#include "strategies/per_layer/per_layer.hpp"

namespace twin::per_layer {

// Megatron layouts: exactly rank_shapes() of the uniform strategy with that TP (SP on), data parallel
// G / t and stage_micro_batch * t / G samples per micro-batch. Ulysses layouts: the same samples and
// local tokens, heads split by the group around attention, weights whole, data parallel over all G.
lowering::RankShapes layer_shapes(const Scenario& scenario, const LayerStrategy& strategy, int stage_gpus,
                                  int stage_micro_batch);
// The embedding and the output layer beside a layer of this strategy: the layer's shapes under
// Megatron TP; under Ulysses a data-parallel unit over the GPU's local tokens (no TP).
lowering::RankShapes edge_shapes(const Scenario& scenario, const LayerStrategy& strategy, int stage_gpus,
                                 int stage_micro_batch);

// Ulysses sequence parallelism (DeepSpeed-Ulysses): linears on the local sequence shard with whole
// weights; before attention an all-to-all turns Q, K, V from sequence-sharded to head-sharded, after it
// the output goes back. The backward mirrors it (and repeats what recompute asks for).
void emit_ulysses_layer_forward(lowering::Emitter& e, const ModelConfig& model, int layer);
void emit_ulysses_layer_backward(lowering::Emitter& e, const ModelConfig& model, int layer);

// One stage of a per-layer plan as one rank class, mirroring StageLowering (lowering_pipeline.cpp)
// unit for unit: with every layer in one Megatron layout it emits the same ops.
class PerLayerStage {
 public:
  // `with_edges`: false leaves out the embedding and the output layer (pricing one layer alone).
  // Sets rc's spans (set_spans over the stage's layers).
  PerLayerStage(const Scenario& scenario, const PerLayerPlan& plan, int stage, int stage_gpus, RankClass& rc,
                bool with_edges = true);

  // The passes in schedule order, the gradient reduction after each unit's last backward and the
  // optimizer phase (each optional, for pricing).
  void run(const std::vector<ScheduleStep>& order, bool reduce_gradients = true, bool optimizer_phase = true);

 private:
  struct UnitPlan {
    lowering::Unit unit;
    LayerStrategy strategy;
    lowering::RankShapes shapes;
    std::int64_t parameters = 0;
    int data_group = 1;
  };
  lowering::Emitter emitter(const lowering::RankShapes& shapes);
  void take(const lowering::Emitter& e);
  OpIndex emit(Op op, int layer);
  OpIndex emit_after(Op op, OpIndex after);
  Op p2p(OpKind kind, OpRole role, int peer_stage, std::int64_t tag) const;
  OpIndex gather_weights(const UnitPlan& u, OpIndex after);
  void reduce_gradients(const UnitPlan& u, OpIndex after);
  // `reduce`: this piece reduces gradients at all; `last_of_stage`: the stage's last backward (where ZeRO-0/1 reduce).
  void run_units(bool forward, bool reduce, bool last_of_stage);
  void forward_pass(const ScheduleStep& step);
  void backward_pass(const ScheduleStep& step, bool reduce, bool last_of_stage);
  void emit_deferred_reductions(bool every_micro_batch_only);
  OpIndex last_on(Stream stream) const;
  void optimizer_phase();
  // As StageLowering: overlap_param_gather's gathers at the iteration's start, overlap_grad_reduce off.
  bool gathers_ahead(const UnitPlan& u) const;
  void gather_updated_weights_ahead(int first_micro_batch);

  const Scenario& scenario_;
  const PerLayerPlan& plan_;
  int stage_, last_stage_;
  std::int64_t tokens_;
  RankClass& rc_;
  std::vector<UnitPlan> units_;  // forward order
  // The emitter's state between units.
  Phase phase_ = Phase::forward;
  int micro_batch_ = -1;
  int layer_ = -1;
  OpIndex chain_ = lowering::kNoOp, pending_wait_ = lowering::kNoOp;
  std::map<int, OpIndex> loss_complete_;  // the emitters' record of each micro-batch's loss all-reduce
  std::vector<const UnitPlan*> deferred_reductions_;   // overlap_grad_reduce off
  std::map<std::int32_t, OpIndex> gathered_ahead_;     // overlap_param_gather: unit -> its gather
};

// Spans of every communicator the layers `strategies` use: the first's as the main ones, the other
// TP/Ulysses and data group sizes as extra spans.
void set_spans(RankClass& rc, const Scenario& scenario, const PerLayerPlan& plan, int stage, int stage_gpus,
               const std::vector<LayerStrategy>& strategies);

}  // namespace twin::per_layer
