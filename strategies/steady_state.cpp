// Two shorter replays and a line through them. The counts are W and 4W micro-batches under GPipe and 1F1B (W the
// pipeline depth, at least 2: both replays reach the steady state, where stage 0 alternates a forward and a
// backward), 2W and 3W under interleaved 1F1B, whose counts must be multiples of the depth and whose replay at W is
// all warm-up (Megatron runs every forward first when the micro-batches equal the stages).
//
// Why 4W, not 2W (2026-11-28, issue 37): deep 1F1B pipelines under full recompute are only nearly periodic. The
// compute beside a pipeline transfer runs slowed (sim/engine.hpp), how much of it overlaps shifts from one micro-batch
// to the next, and the iteration's end lies up to about 0.07 of a micro-batch's time off the line through the other
// counts (Korthikanti et al.'s 530B on 2,240 A100s, TP 8 x PP 35, 1F1B, full recompute: t(m) for m = 35 ... 280
// within +-13 ms of one line, a micro-batch 190 ms). The line's slope is off by the difference of two such offsets
// over the span between the replays, and the extrapolation carries it m - m2 micro-batches further: relative to the
// iteration, at most about (offset / micro-batch time) / span. A span of W (W and 2W) put that row 0.124% off at the
// Ampere factor of 1.30 (0.1% stated); a span of 3W (W and 4W) bounds it at 0.07 / 105 = 0.064%, whatever m is.
// Measured on every 1F1B candidate of 8 stages or more of the published configurations (2026-11-28): from (W, 2W)
// worst 0.124%, from (W, 4W) worst 0.040%. Interleaved pipelines replayed at (2W, 3W) came out exact to 0.0001% on
// every such candidate, so their span stays W. The price: the 1F1B replays hold 5W micro-batches, not 3W, and apply
// from 7.5 W micro-batches, as interleaved ones.
#include "strategies/steady_state.hpp"

#include <algorithm>
#include <cmath>

#include "sim/engine.hpp"
#include "strategies/class_by_class.hpp"
#include "strategies/schedule.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

// The line through (m1, t1) and (m2, t2) at m, to the nanosecond.
TimeNs along(TimeNs t1, TimeNs t2, const SteadyStateReplay& replay, int micro_batches) {
  const double per_micro_batch = static_cast<double>(t2 - t1) /
                                 static_cast<double>(replay.second_micro_batches - replay.first_micro_batches);
  const double t = static_cast<double>(t2) + per_micro_batch * (micro_batches - replay.second_micro_batches);
  if (!(t <= static_cast<double>(sim::kHorizonNs))) sim::beyond_horizon();
  return std::max<TimeNs>(0, std::llround(t));
}

}  // namespace

std::optional<SteadyStateReplay> steady_state_counts(const Scenario& scenario, const Strategy& strategy) {
  if (!runs_separate_passes(strategy.schedule)) return std::nullopt;
  // Megatron's combined 1F1B pairs the passes of the steady state: not yet held to the whole replay by the tests
  // that hold the extrapolation (tests/strategies/steady_state_test.cpp), so replayed whole.
  if (runs_combined_1f1b(scenario.framework, strategy)) return std::nullopt;
  // ZeRO-3 gathers every unit's weights on the data-parallel stream before each pass, and where that stream is
  // slower than the compute its queue grows for several pipeline depths before the time per micro-batch settles
  // (the 70B search's ZeRO-3 pipelines: up to 0.28% off from W and 2W): replayed whole. Not as DeepSpeed drives
  // it: every unit waits for all that was issued on that stream before it (strategies/deepspeed_zero3.hpp), so
  // no queue builds up from one micro-batch to the next.
  if (strategy.zero_stage >= 3 && scenario.framework.zero_implementation != ZeroImplementation::deepspeed)
    return std::nullopt;
  // Where several GPUs of a node share a NIC, their pipeline sends and data-parallel reductions between nodes share
  // its fluid bandwidth and the time per micro-batch does not settle to one value (BLOOM's Jean Zay nodes, 8 GPUs
  // on 4 Omni-Path links: up to 0.32% of the iteration and 2.4% of it in a part of the breakdown off from W and
  // 2W; with one NIC per GPU 0.04%): replayed whole.
  if (scenario.cluster.total_nodes() > 1)
    for (const NodeGroup& group : scenario.cluster.node_groups)
      if (group.nics.count > 0 && group.nics.count < group.gpus_per_node) return std::nullopt;
  const int width = std::max(2, strategy.pipeline_model_parallel_size);
  SteadyStateReplay replay = strategy.schedule == Schedule::interleaved_1f1b ? SteadyStateReplay{2 * width, 3 * width}
                                                                             : SteadyStateReplay{width, 4 * width};
  // The output layer's deferred weight gradients (framework.defer_embedding_wgrad_compute) run after the last stage's
  // last backward: the replays must defer as many as the whole run, so both start at or past the deferral limit
  // (whole pipeline rounds further on); with every micro-batch deferred the drain grows with the count, replayed whole.
  if (const int deferred = deferred_output_wgrad_micro_batches(scenario.framework, strategy.pipeline_model_parallel_size,
                                                               strategy.num_micro_batches);
      deferred > 0) {
    if (deferred == strategy.num_micro_batches) return std::nullopt;
    const int shift = std::max(0, (deferred - replay.first_micro_batches + width - 1) / width * width);
    replay.first_micro_batches += shift;
    replay.second_micro_batches += shift;
  }
  // Worth it only where the two replays hold at most 2/3 of the micro-batches.
  if (3 * (replay.first_micro_batches + replay.second_micro_batches) > 2 * strategy.num_micro_batches)
    return std::nullopt;
  return replay;
}

std::optional<SteadyStateReplay> steady_state_replay(const Scenario& scenario, const Strategy& strategy) {
  const std::optional<SteadyStateReplay> replay = steady_state_counts(scenario, strategy);
  if (!replay) return std::nullopt;
  for (int micro_batches : {replay->first_micro_batches, replay->second_micro_batches}) {
    Strategy shorter = strategy;
    shorter.num_micro_batches = micro_batches;
    if (invalid_reason(scenario, shorter)) return std::nullopt;
  }
  return replay;
}

IterationResult extrapolate_steady_state(const IterationResult& first, const IterationResult& second,
                                         const SteadyStateReplay& replay, int micro_batches) {
  const auto at = [&](TimeNs t1, TimeNs t2) { return along(t1, t2, replay, micro_batches); };
  IterationResult result;
  result.events = first.events + second.events;
  result.classes.resize(second.classes.size());
  for (std::size_t c = 0; c < second.classes.size(); ++c) {
    const ClassResult& a = first.classes.at(c);
    const ClassResult& b = second.classes[c];
    ClassResult& out = result.classes[c];
    out.finish_ns = at(a.finish_ns, b.finish_ns);
    out.communication_busy_ns = at(a.communication_busy_ns, b.communication_busy_ns);
    TimeBreakdown& parts = out.breakdown;
    parts.compute_ns = at(a.breakdown.compute_ns, b.breakdown.compute_ns);
    parts.exposed_communication_ns = at(a.breakdown.exposed_communication_ns, b.breakdown.exposed_communication_ns);
    parts.optimizer_ns = at(a.breakdown.optimizer_ns, b.breakdown.optimizer_ns);
    // The parts add up to the finish, as the engine's do: the bubble takes the rounding.
    parts.bubble_ns = std::max<TimeNs>(
        0, out.finish_ns - parts.compute_ns - parts.exposed_communication_ns - parts.optimizer_ns);
    if (out.finish_ns > result.iteration_ns) {  // the first class of the latest finish, as the engine picks
      result.iteration_ns = out.finish_ns;
      result.critical_class = static_cast<int>(c);
    }
  }
  if (!result.classes.empty()) result.breakdown = result.classes[result.critical_class].breakdown;
  return result;
}

IterationResult simulate_steady_state(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                      const SteadyStateReplay& replay, sim::PriceCache* prices) {
  const auto replay_at = [&](int micro_batches) {
    Strategy shorter = strategy;
    shorter.num_micro_batches = micro_batches;
    return simulate_class_by_class(scenario, shorter, profile, prices);
  };
  const IterationResult first = replay_at(replay.first_micro_batches);
  const IterationResult second = replay_at(replay.second_micro_batches);
  IterationResult result = extrapolate_steady_state(first, second, replay, strategy.num_micro_batches);
  result.steady_state = replay;
  return result;
}

}  // namespace twin
