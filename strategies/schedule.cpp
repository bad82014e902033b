// Pipeline schedules as per-stage orders of (forward|backward, micro-batch, chunk) steps.
// Interleaved 1F1B follows Megatron-LM's schedules.py (get_pp_rank_microbatches and the
// virtual-microbatch tables with microbatch_group_size_per_vp_stage = pipeline size).
#include "strategies/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace twin {
namespace {

std::vector<ScheduleStep> gpipe_order(int micro_batches, int virtual_stages) {
  std::vector<ScheduleStep> order;
  order.reserve(2 * static_cast<std::size_t>(micro_batches) * virtual_stages);
  for (int chunk = 0; chunk < virtual_stages; ++chunk)
    for (int mb = 0; mb < micro_batches; ++mb) order.push_back({true, mb, chunk});
  for (int chunk = virtual_stages - 1; chunk >= 0; --chunk)
    for (int mb = 0; mb < micro_batches; ++mb) order.push_back({false, mb, chunk});
  return order;
}

// PipeDream-flush: stage s runs p-s-1 warm-up forwards, then alternates one forward and one
// backward, then drains the backwards it still owes.
// Megatron's combined 1F1B runs one more warm-up forward.
// `combined`: the combined 1F1B, whose steady-state forwards run beside the backward after them.
std::vector<ScheduleStep> one_f_one_b_order(int stages, int stage, int micro_batches, bool combined = false) {
  std::vector<ScheduleStep> order;
  order.reserve(2 * static_cast<std::size_t>(micro_batches));
  const int extra_warmup = combined ? 1 : 0;
  const int warmup = std::min(stages - stage - 1 + extra_warmup, micro_batches);
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) order.push_back({true, next_forward, 0});
  while (next_forward < micro_batches) {
    order.push_back({true, next_forward++, 0, combined});
    order.push_back({false, next_backward++, 0});
  }
  while (next_backward < micro_batches) order.push_back({false, next_backward++, 0});
  return order;
}

// Megatron's interleaving: virtual micro-batch k runs chunk (k/p)%v of micro-batch (k/(p*v))*p + k%p;
// backwards walk the chunks in reverse.
ScheduleStep interleaved_step(bool forward, int k, int stages, int virtual_stages) {
  const int chunk_in_group = (k / stages) % virtual_stages;
  const int micro_batch = (k / (stages * virtual_stages)) * stages + k % stages;
  return {forward, micro_batch, forward ? chunk_in_group : virtual_stages - 1 - chunk_in_group};
}

std::vector<ScheduleStep> interleaved_order(int stages, int stage, int micro_batches, int virtual_stages,
                                           bool combined) {
  const int total = micro_batches * virtual_stages;
  int warmup = (stages - stage - 1) * 2 + (virtual_stages - 1) * stages + (combined ? 1 : 0);
  warmup = std::min(warmup, total);
  std::vector<ScheduleStep> order;
  order.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) order.push_back(interleaved_step(true, k, stages, virtual_stages));
  const int steady = total - warmup;
  for (int k = 0; k < steady; ++k) {
    order.push_back(interleaved_step(true, k + warmup, stages, virtual_stages));
    order.back().beside_next = combined;
    order.push_back(interleaved_step(false, k, stages, virtual_stages));
  }
  for (int k = steady; k < total; ++k) order.push_back(interleaved_step(false, k, stages, virtual_stages));
  return order;
}

// Unit u of the fold runs micro-batch u's forward strand (while there is one) beside the backward strand of the
// micro-batch `stages` units before it (once there is one).
StrandStep strand_step(int stages, int micro_batches, int unit, bool down) {
  return StrandStep{unit, down, unit < micro_batches ? unit : -1, unit >= stages ? unit - stages : -1};
}

}  // namespace

StrandStep double_strand_step(int stages, int micro_batches, int forward_chunk, bool has_forward, int micro_batch) {
  const int unit = has_forward ? micro_batch : micro_batch + stages;
  if (micro_batch < 0 || micro_batch >= micro_batches || (forward_chunk != 0 && forward_chunk != 1))
    throw std::invalid_argument("double_strand_step: no such pass");
  return strand_step(stages, micro_batches, unit, forward_chunk == 0);
}

std::vector<std::vector<StrandStep>> double_strand_schedule(int stages, int micro_batches) {
  if (stages < 1 || micro_batches < 1)
    throw std::invalid_argument("double_strand_schedule: stages and micro-batches must be >= 1");
  const int units = micro_batches + stages;
  const auto step = [&](int unit, bool down) { return strand_step(stages, micro_batches, unit, down); };
  std::vector<std::vector<StrandStep>> orders(static_cast<std::size_t>(stages));
  for (int stage = 0; stage < stages; ++stage) {
    for (const ScheduleStep& pass : one_f_one_b_order(stages, stage, units))
      orders[stage].push_back(step(pass.micro_batch, pass.forward));
  }
  return orders;
}

bool runs_combined_1f1b(const FrameworkConfig& framework, const Strategy& strategy) {
  return framework.overlap_moe_expert_parallel_comm && strategy.expert_model_parallel_size > 1;
}

bool runs_separate_passes(Schedule schedule) {
  return schedule == Schedule::gpipe || schedule == Schedule::one_f_one_b || schedule == Schedule::interleaved_1f1b;
}

std::vector<std::vector<ScheduleStep>> pipeline_schedule(Schedule schedule, int stages, int micro_batches,
                                                         int virtual_stages, bool combined_1f1b) {
  // Megatron's get_pp_rank_microbatches (schedules.py): with overlap_moe_expert_parallel_comm one more warm-up
  // forward, "to ensure the forward and backward computations are independent in all 1f1b steps".
  const bool combined_order = schedule == Schedule::interleaved_1f1b || schedule == Schedule::gpipe ||
                              (schedule == Schedule::one_f_one_b && stages == 1);
  if (combined_1f1b && !combined_order)
    throw std::invalid_argument(
        "pipeline_schedule: the combined 1F1B runs interleaved 1F1B or 1F1B on one stage (or GPipe's order for the "
        "lower bound)");
  if (stages < 1 || micro_batches < 1 || virtual_stages < 1)
    throw std::invalid_argument("pipeline_schedule: stages, micro-batches and virtual stages must be >= 1");
  std::vector<std::vector<ScheduleStep>> orders(static_cast<std::size_t>(stages));
  std::vector<std::vector<StrandStep>> strand_orders;
  for (int stage = 0; stage < stages; ++stage) {
    switch (schedule) {
      case Schedule::gpipe:
        orders[stage] = gpipe_order(micro_batches, virtual_stages);
        break;
      case Schedule::one_f_one_b:
        if (virtual_stages != 1) throw std::invalid_argument("pipeline_schedule: 1f1b has one chunk per stage");
        orders[stage] = one_f_one_b_order(stages, stage, micro_batches, combined_1f1b);
        break;
      case Schedule::interleaved_1f1b:
        if (micro_batches % stages != 0)
          throw std::invalid_argument("pipeline_schedule: interleaved 1F1B needs micro-batches % stages == 0");
        orders[stage] = interleaved_order(stages, stage, micro_batches, virtual_stages, combined_1f1b);
        break;
      case Schedule::double_strand:
        if (virtual_stages != 1) throw std::invalid_argument("pipeline_schedule: double-strand has no virtual stages");
        if (strand_orders.empty()) strand_orders = double_strand_schedule(stages, micro_batches);
        for (const StrandStep& step : strand_orders[stage]) {
          if (step.forward_micro_batch >= 0) orders[stage].push_back({true, step.forward_micro_batch, step.forward_chunk()});
          if (step.backward_micro_batch >= 0)
            orders[stage].push_back({false, step.backward_micro_batch, step.backward_chunk()});
        }
        break;
    }
  }
  return orders;
}

int peak_in_flight_passes(const std::vector<ScheduleStep>& stage_order) {
  int in_flight = 0, peak = 0;
  for (const ScheduleStep& step : stage_order) {
    in_flight += step.forward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  return peak;
}

int peak_in_flight_passes(const std::vector<ScheduleStep>& stage_order, int chunk) {
  int in_flight = 0, peak = 0;
  for (const ScheduleStep& step : stage_order) {
    if (step.chunk != chunk) continue;
    in_flight += step.forward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  return peak;
}

}  // namespace twin
