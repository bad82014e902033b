// One lowering of one micro-batch (in GPipe's order, double strand in its own) gives each class's compute per
// micro-batch and per iteration.
#include "strategies/lower_bound.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "sim/flat_graph.hpp"
#include "strategies/lowering.hpp"
#include "strategies/schedule.hpp"

namespace twin {
namespace {

std::vector<sim::ComputeBusy> busy_at(const Scenario& scenario, Strategy strategy, int micro_batches,
                                      const Profile& profile, sim::PriceCache* prices) {
  // Megatron's combined 1F1B runs one micro-batch's compute through the other's EP all-to-alls: the bound counts
  // no communication it waits through (which GPipe's order, lowered here, would put between its compute).
  const bool count_waits = !runs_combined_1f1b(scenario.framework, strategy);
  strategy.num_micro_batches = micro_batches;
  std::vector<sim::ComputeBusy> busy;
  lower_class_by_class(scenario, strategy, profile, nullptr, [&](const IterationGraph& graph, int c) {
    busy.push_back(sim::compute_busy_of(graph, c, scenario.cluster, profile, prices, count_waits));
  });
  return busy;
}

// The busiest class's compute, its passes scaled from the lowered micro-batches to the strategy's `total`.
// Under GPipe, 1F1B and interleaved 1F1B also the pipeline's fill and drain, which go through chunk 0 (virtual
// stages 0..p-1): stage s's first compute is micro-batch 0's forward of its chunk 0, which waits for that
// forward to pass chunk 0 of stages 0..s-1; its last is the last micro-batch's backward of chunk 0 (the schedules
// walk the chunks back to 0), which all its other compute precedes in its one compute stream; once that backward
// has begun, stage 0 still runs its own chunk-0 backward of that micro-batch (but for recomputed forwards, which
// need no gradient) and then its optimizer step:
//   iteration >= sum_{j<s} F_j + (busy_s - B_s) + (B_0 - R_0) + optimizer_0,
// with F_j, B_j, R_j one micro-batch's forward, backward and recomputed compute of stage j's chunk 0 (the least
// over its classes).
// `last_stage_off_chain`: the last stage runs compute after its last backward (deferred output-layer weight
// gradients), so its chain is not followed; the other stages' are.
TimeNs busiest(const std::vector<sim::ComputeBusy>& busy, int lowered, int total, bool follows_pipeline,
               bool last_stage_off_chain) {
  const std::int64_t scale = total / lowered;
  TimeNs bound = 0;
  for (const sim::ComputeBusy& b : busy) bound = std::max(bound, b.optimizer_ns + b.other_ns() * scale);
  if (!follows_pipeline) return bound;
  int stages = 0;
  for (const sim::ComputeBusy& b : busy) stages = std::max(stages, b.stage + 1);
  constexpr TimeNs kUnset = std::numeric_limits<TimeNs>::max();
  std::vector<TimeNs> forward(stages, kUnset), drain(stages, kUnset), optimizer(stages, kUnset);
  for (const sim::ComputeBusy& b : busy) {  // per micro-batch: each lowered micro-batch computes alike
    forward[b.stage] = std::min(forward[b.stage], b.first_chunk.forward_ns / lowered);
    drain[b.stage] = std::min(drain[b.stage], (b.first_chunk.backward_ns - b.first_chunk.recomputed_ns) / lowered);
    optimizer[b.stage] = std::min(optimizer[b.stage], b.optimizer_ns);
  }
  for (TimeNs* per_stage : {forward.data(), drain.data(), optimizer.data()})
    for (int s = 0; s < stages; ++s)
      if (per_stage[s] == kUnset) return bound;  // a stage without a class: no chain to follow
  for (const sim::ComputeBusy& b : busy) {
    if (last_stage_off_chain && b.stage == stages - 1) continue;
    TimeNs fill = 0;
    for (int j = 0; j < b.stage; ++j) fill += forward[j];
    const TimeNs before_last_backward = b.other_ns() * scale - b.first_chunk.backward_ns / lowered;
    bound = std::max(bound, fill + before_last_backward + drain[0] + optimizer[0]);
  }
  return bound;
}

// Where the last stage defers its output-layer weight gradients to after its last backward
// (framework.defer_embedding_wgrad_compute), its passes no longer compute alike and its last backward is not its last
// compute: the bound lowers the same strategy without the deferral (the same compute, every other stage's alike; the
// gathers the drain waits through only add) and follows every stage's chain but the last's.
struct BoundInput {
  const Scenario& scenario;
  std::optional<Scenario> without_deferral;
  bool follows_pipeline;
  const Scenario& lowered() const { return without_deferral ? *without_deferral : scenario; }
  bool last_stage_off_chain() const { return without_deferral.has_value(); }
};

BoundInput bound_input(const Scenario& scenario, const Strategy& strategy) {
  BoundInput input{scenario, std::nullopt, runs_separate_passes(strategy.schedule)};
  if (deferred_output_wgrad_micro_batches(scenario.framework, strategy.pipeline_model_parallel_size,
                                          strategy.num_micro_batches) == 0)
    return input;
  input.without_deferral = scenario;
  input.without_deferral->framework.defer_embedding_wgrad_compute = false;
  input.without_deferral->framework.wgrad_deferral_limit = 0;
  return input;
}

}  // namespace

TimeNs compute_lower_bound_full_ns(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                   sim::PriceCache* prices) {
  const int total = strategy.num_micro_batches;
  const BoundInput input = bound_input(scenario, strategy);
  return busiest(busy_at(input.lowered(), strategy, total, profile, prices), total, total, input.follows_pipeline,
                 input.last_stage_off_chain());
}

TimeNs compute_lower_bound_ns(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                              sim::PriceCache* prices) {
  // The sums do not depend on the order of the passes, only on what each pass computes: every pipeline schedule
  // is lowered in GPipe's order (which takes any count of micro-batches and of chunks) at one micro-batch. A
  // strategy would not run so few (validity.hpp), but each pass is lowered as at any count.
  // Double strand keeps its own schedule, whose units pair a forward and a backward pass.
  const int total = strategy.num_micro_batches;
  if (total <= 1) return compute_lower_bound_full_ns(scenario, strategy, profile, prices);
  const BoundInput input = bound_input(scenario, strategy);
  return busiest(busy_at(input.lowered(), lower_bound_strategy(strategy), 1, profile, prices), 1, total,
                 input.follows_pipeline, input.last_stage_off_chain());
}

Strategy lower_bound_strategy(const Strategy& strategy) {
  // What compute_lower_bound_ns reads of the strategy: all of it but the schedule of separate passes, which it
  // lowers in GPipe's order (and the micro-batch count, which it lowers at one, but scales by).
  Strategy bounded = strategy;
  if (strategy.num_micro_batches > 1 && runs_separate_passes(strategy.schedule)) bounded.schedule = Schedule::gpipe;
  return bounded;
}

}  // namespace twin
