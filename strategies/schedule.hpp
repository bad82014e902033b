// Pipeline schedules: the order in which each pipeline stage runs forward and backward passes of
// micro-batches over its model chunks. GPipe, 1F1B (PipeDream-flush) and interleaved 1F1B (Megatron).
#pragma once
#include <vector>

#include "core/strategy.hpp"

namespace twin {

struct ScheduleStep {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;     // model chunk on this stage (0..virtual_stages-1); global virtual stage = chunk*stages + stage
  bool operator==(const ScheduleStep&) const = default;
};

// One list per stage. Every (micro_batch, chunk) appears once forward and once backward on each stage.
// interleaved_1f1b needs micro_batches % stages == 0 (Megatron's rule); validity.cpp checks it first.
std::vector<std::vector<ScheduleStep>> pipeline_schedule(Schedule schedule, int stages, int micro_batches,
                                                         int virtual_stages);

// The most forward passes whose activations a stage holds at once under this schedule (per chunk-pass).
int peak_in_flight_passes(const std::vector<ScheduleStep>& stage_order);
// The same, counting only the passes of one chunk (e.g. the last chunk, which holds the logits).
int peak_in_flight_passes(const std::vector<ScheduleStep>& stage_order, int chunk);

}  // namespace twin
