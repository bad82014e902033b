// Internal to the lowering: one pipeline stage's ops in schedule order. lowering_pipeline.cpp runs the
// Megatron schedules (one pass at a time on one compute stream); lowering_double_strand.cpp runs the
// double-strand schedule (two strands on two compute streams, paired segment by segment).
#pragma once
#include <map>
#include <utility>
#include <vector>

#include "cost/profile.hpp"
#include "strategies/combined_1f1b.hpp"
#include "strategies/double_strand/strand_pairing.hpp"
#include "strategies/lowering.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/schedule.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::lowering {

// A unit of weights used together: the embedding, one layer, or the output layer.
struct Unit {
  enum Kind { embedding_unit, layer_unit, head_unit } kind;
  int layer = -1;
};

void emit_unit(Emitter& e, const ModelConfig& model, const Unit& unit, bool forward);
// A collective over a unit's weights or gradients on the data-parallel stream, tagged with the unit it moves.
Op parameter_collective(OpKind kind, OpRole role, GroupKind group, int group_size, std::int64_t bytes,
                        std::int32_t unit);

class StageLowering {
 public:
  // `profile` prices the double-strand pairing; the Megatron schedules do not use it.
  StageLowering(const Scenario& scenario, const Strategy& strategy, const RankShapes& shapes, RankClass& rc,
                const Profile* profile);

  void run(int stage, const std::vector<ScheduleStep>& order);
  // `pairings`, when given, receives what the pairing chose for each kind of unit pair (reports).
  void run_double_strand(int stage, const std::vector<StrandStep>& order, std::vector<StrandPairingSummary>* pairings);

 private:
  // ---- shared (lowering_pipeline.cpp) ----
  int virtual_stage(int chunk) const { return virtual_stage_of(strategy_, stage_, chunk); }
  std::int64_t p2p_tag(int micro_batch, int boundary, bool backward) const {
    return (static_cast<std::int64_t>(micro_batch) * (last_virtual_stage_ + 1) + boundary) * 2 + (backward ? 1 : 0);
  }
  void begin_stage(int stage);
  std::vector<Unit> units(int chunk) const;
  RankParameters unit_parameters(const Unit& u) const;
  Op p2p(OpKind kind, OpRole role, int peer_stage, std::int64_t tag, int tensors = 1, bool tp_share = false) const;
  // The receive of a Megatron schedule's pipeline tensor, and its TP all-gather under scatter/gather.
  void receive(OpRole role, int peer_stage, std::int64_t tag);
  OpIndex gather_weights(const Unit& u, OpIndex after, bool forward);
  // A parameter all-gather after `after`, followed under DeepSpeed's ZeRO-3 by its memory passes
  // (strategies/deepspeed_zero3.hpp); the last op.
  OpIndex emit_param_gather(const Op& gather, OpIndex after);
  // The unit's weight gathers; `dense_elements` of its dense weights (-1: all of them), the dense gather with
  // `host_ns` of host time (Op::host_ns).
  OpIndex emit_weight_gather(const Unit& u, OpIndex after, std::int64_t dense_elements = -1, TimeNs host_ns = 0);
  // DeepSpeed's ZeRO-3: the elements of a layer unit's weights its pass gathers on demand rather than prefetched
  // (strategies/deepspeed_zero3.hpp); 0 for other units and other ZeRO-3.
  std::int64_t on_demand_elements(const Unit& u, bool forward) const;
  // DeepSpeed's ZeRO-3: the host's loops for the weights a unit's pass fetches on demand, or prefetches (the
  // embedding's word and learned position tables, the head's output weights, a layer's linears as
  // deepspeed_layer_gathers says); 0 for other ZeRO-3 and without data parallelism.
  TimeNs gather_host_ns(const Unit& u, bool forward, bool on_demand) const;
  // Emits the unit's gradient reduction after `after` (overlap_grad_reduce), or keeps it for the optimizer
  // phase, which reduces every kept unit once the whole backward has finished.
  void reduce_gradients(const Unit& u, OpIndex after);
  // training.fp8: the casts of the stage's FP8 weights after the optimizer step (strategies/fp8_linears.hpp).
  void cast_weights_to_fp8(std::int64_t shard_elements);
  void emit_gradient_reduction(const Unit& u, OpIndex after);
  // A unit's pass in a Megatron schedule (forward_pass, backward_pass, combined_pass): the output layer's backward
  // leaves its weight gradient to the drain while the stage has deferrals left (framework.defer_embedding_wgrad_compute).
  void emit_stage_unit(const Unit& u, bool forward);
  // reduce_gradients, but for the output layer while deferred weight gradients are pending: its reduction waits for
  // the drain (after its own deferred GEMM in a step that reduces every micro-batch, else after the last).
  void reduce_unit_gradients(const Unit& u, OpIndex after);
  // Megatron-Core's finish_embedding_wgrad_compute: after the stage's last backward, the deferred weight-gradient
  // GEMMs in micro-batch order, each input's gather (SP) double-buffered ahead of them; then the held reductions.
  void drain_deferred_output_weight_gradients();
  // DeepSpeed's BF16_Optimizer: the stage's whole gradient buffer reduced after `after`; the last op, or kNoOp.
  OpIndex reduce_bf16_optimizer_gradients(OpIndex after);
  // overlap_param_gather under ZeRO 1/2: the previous step's updated weights gathered per unit at the
  // iteration's start, in the order of first use; a unit's first forward waits for its own gather.
  void gather_updated_weights_ahead(const std::vector<ScheduleStep>& order);
  bool gathers_updated_weights_ahead() const;
  void run_units(const std::vector<Unit>& list, bool forward, bool reduce_after);
  void forward_pass(const ScheduleStep& step);
  void backward_pass(const ScheduleStep& step, bool last_of_chunk);
  OpIndex last_on(Stream stream);
  bool fsdp_reshards(const Unit& u) const;  // PyTorch's FSDP: whether the backward gathers u's weights again
  void optimizer_phase();
  // optimizer_phase's parts: the tied table's sum, the TP sum of duplicated weights' gradients (returned: the step
  // waits for it) and the norm's all-reduce; the updated weights all-gathered (ZeRO-1/2).
  OpIndex synchronise_gradients(OpIndex last_compute, OpIndex last_compute2);
  void gather_updated_weights(OpIndex update, std::int64_t dense, std::int64_t expert);
  void emit_deferred_reductions();
  // FP8 delayed scaling: the amax all-reduce and scale update after a forward or backward of `chunk`
  // (strategies/fp8_linears.hpp); every later op of the stage's passes waits for it, as Transformer Engine's
  // blocking all-reduce holds the compute stream.
  void reduce_fp8_amaxes(int chunk, bool forward);
  // Under SP the TP sum of the gradients of weights every TP rank holds whole (MLA's down projections and latent
  // norms), after `after` and the data-parallel reduction; kNoOp where there is none.
  OpIndex sum_duplicated_gradients(OpIndex after);

  // ---- double strand (lowering_double_strand.cpp) ----
  // One unit of one strand emitted into a scratch graph: its ops and their dependencies (-1: the
  // strand's chain before the unit), and the op that is the strand's chain after it.
  struct StrandUnit {
    std::vector<Op> ops;
    std::vector<std::vector<int>> predecessors;
    int chain_after = -1;
  };
  // `backward_compute`: the stream the backward strand computes on (compute2 beside a forward strand on compute).
  StrandUnit record_unit(const Unit& unit, bool forward, int micro_batch, int chunk,
                         Stream backward_compute = Stream::compute2) const;

  // ---- Megatron's combined 1F1B (lowering_combined_1f1b.cpp) ----
  // The forward pass `forward` and the backward pass `backward` together, unit beside unit; MoE layer pairs in the
  // issue order of strategies/combined_1f1b.hpp.
  void combined_pass(const ScheduleStep& forward, const ScheduleStep& backward, bool last_of_chunk);
  // Copies a layer pair's ops (recorded with record_unit) in `order`; updates the two chains.
  void emit_combined(const StrandUnit& forward, const StrandUnit& backward, const std::vector<IssuedOp>& order,
                     OpIndex& forward_chain, OpIndex& backward_chain);
  // combined_pass's parts: the two passes' receives (their chains), the units pair by pair, the sends and amaxes.
  std::pair<OpIndex, OpIndex> combined_receives(const ScheduleStep& forward, const ScheduleStep& backward);
  void combined_units(const ScheduleStep& forward, const ScheduleStep& backward, bool reduces, OpIndex& forward_chain,
                      OpIndex& backward_chain);
  void combined_ends(const ScheduleStep& forward, const ScheduleStep& backward, OpIndex forward_chain,
                     OpIndex backward_chain);

  const StrandPairing& pairing_for(const Unit& forward_unit, const StrandUnit& forward,
                                   const Unit& backward_unit, const StrandUnit& backward,
                                   std::vector<StrandPairingSummary>* pairings);
  void strand_pass(const StrandStep& step, bool reduce_after, std::vector<StrandPairingSummary>* pairings);
  // Copies both strands' ops in the pairing's block order; updates the two chains.
  void emit_paired(const StrandUnit& forward, const StrandUnit& backward, const StrandPairing& pairing,
                   OpIndex& forward_chain, OpIndex& backward_chain);

  const ModelConfig& model_;
  const Scenario& scenario_;
  const Strategy& strategy_;
  const RankShapes& s_;
  const Profile* profile_;
  Emitter e_;
  int stage_ = 0;
  int last_virtual_stage_ = 0;
  bool holds_embedding_ = false;
  bool holds_head_ = false;  // the output layer: the last virtual stage is one of this stage's chunks
  // Double strand: the last op of each micro-batch on this stage; pairings by (forward, backward) unit kind.
  std::vector<OpIndex> last_of_micro_batch_;
  // Units whose gradient reduction waits for the end of the backward (overlap_grad_reduce off).
  std::vector<Unit> deferred_reductions_;
  // overlap_param_gather: a unit's gather (parameter_unit -> op) until its first forward consumes it.
  std::map<std::int32_t, OpIndex> weights_gathered_ahead_;
  std::map<std::pair<int, int>, StrandPairing> pairings_;
  // framework.defer_embedding_wgrad_compute on the stage holding the output layer: how many of its backward passes
  // defer (the first ones), those deferred so far (in backward order) and whether the output layer's kept gradients
  // are reduced after the drain.
  struct DeferredWeightGradient {
    int micro_batch = 0, chunk = 0;
    bool reduces = false;  // its own reduction follows it (a step that reduces every micro-batch)
  };
  int deferred_head_passes_ = 0;
  std::vector<DeferredWeightGradient> deferred_output_wgrads_;
  bool head_reduction_after_drain_ = false;
  // Micro-batches run their backward in index order, so the first not deferred stores the output layer's gradient
  // first, or, all deferred, the drain's first.
  int first_head_weight_gradient() const {
    return deferred_head_passes_ < strategy_.num_micro_batches ? deferred_head_passes_ : 0;
  }
};

}  // namespace twin::lowering
