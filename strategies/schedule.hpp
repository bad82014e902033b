// Pipeline schedules: the order in which each pipeline stage runs forward and backward passes of
// micro-batches over its model chunks. GPipe, 1F1B (PipeDream-flush), interleaved 1F1B (Megatron) and
// DHeLlam's double strand (folded, W-shaped).
#pragma once
#include <vector>

#include "core/framework.hpp"
#include "core/strategy.hpp"

namespace twin {

struct ScheduleStep {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;     // model chunk on this stage (0..virtual_stages-1); global virtual stage = chunk*stages + stage
  // Megatron's combined 1F1B: this forward runs beside the next step, another micro-batch's backward (a pair of its
  // steady state; a warm-up forward followed by a cool-down backward runs alone, as in Megatron).
  bool beside_next = false;
  bool operator==(const ScheduleStep&) const = default;
};

// Double strand: the model is folded (sharded_parameters.hpp: chunk 0 of stage s is virtual stage s,
// chunk 1 is 2*pp-1-s). Unit u carries the forward of micro-batch u (u < m) and the backward of micro-batch
// u - pp (u >= pp): m + pp units, so warm-up and cool-down grow by the pipeline depth. A unit's down pass
// runs on stages 0..pp-1 the forward over chunk 0 beside the backward over chunk 1; its up pass, on
// stages pp-1..0, the forward over chunk 1 beside the backward over chunk 0. Each stage orders the passes
// as 1F1B orders forwards (down) and backwards (up), and one p2p carries both strands' tensors.
struct StrandStep {
  int unit = 0;
  bool down = true;
  int forward_micro_batch = -1;   // -1: no forward strand (cool-down)
  int backward_micro_batch = -1;  // -1: no backward strand (warm-up)
  int forward_chunk() const { return down ? 0 : 1; }
  int backward_chunk() const { return down ? 1 : 0; }
  bool operator==(const StrandStep&) const = default;
};
std::vector<std::vector<StrandStep>> double_strand_schedule(int stages, int micro_batches);
// The step of a double-strand pass whose forward strand runs `forward_chunk` and that names `micro_batch`: its
// forward strand's (`has_forward`), or, in the cool-down, its backward strand's. Every stage runs each such step
// once, so a pass's pipeline transfer (its op names the pass so) carries this step's tensors.
StrandStep double_strand_step(int stages, int micro_batches, int forward_chunk, bool has_forward, int micro_batch);

// GPipe, 1F1B and interleaved 1F1B: every (micro_batch, chunk) forward and backward is a pass of its own, each stage
// fills through chunk 0's first forward and drains through its last backward, and past the fill each further
// micro-batch repeats the same work (what the lower bound and the steady-state extrapolation rely on). Double strand
// pairs a forward and a backward pass in each unit.
bool runs_separate_passes(Schedule schedule);

// One list per stage. Every (micro_batch, chunk) appears once forward and once backward on each stage.
// interleaved_1f1b needs micro_batches % stages == 0 (Megatron's rule); validity.cpp checks it first.
// double_strand: each StrandStep as its forward step then its backward step (virtual_stages must be 1;
// the two chunks are the fold's).
// `combined_1f1b`: Megatron's overlapped EP schedule (framework.overlap_moe_expert_parallel_comm), only with
// interleaved 1F1B or 1F1B on one stage: each stage runs one more warm-up forward, so that every forward of the
// steady state is followed by the backward of another micro-batch, which the lowering runs beside it
// (ScheduleStep::beside_next, strategies/lowering_combined_1f1b.cpp); a stage whose warm-up takes every forward
// has no such pair. GPipe's order is taken with it too, unchanged: every forward already
// precedes every backward, and the compute lower bound (lower_bound.cpp) lowers any schedule in that order.
std::vector<std::vector<ScheduleStep>> pipeline_schedule(Schedule schedule, int stages, int micro_batches,
                                                         int virtual_stages, bool combined_1f1b = false);
// Whether a valid strategy runs the combined 1F1B (validity.cpp holds the flag to the candidates it allows).
bool runs_combined_1f1b(const FrameworkConfig& framework, const Strategy& strategy);

// The most forward passes whose activations a stage holds at once under this schedule (per chunk-pass).
int peak_in_flight_passes(const std::vector<ScheduleStep>& stage_order);
// The same, counting only the passes of one chunk (e.g. the last chunk, which holds the logits).
int peak_in_flight_passes(const std::vector<ScheduleStep>& stage_order, int chunk);

}  // namespace twin
