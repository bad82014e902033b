// Applies the windows of executor/weight_residency.hpp op by op: before an op, the whole buffers it opens are
// allocated from CUDA's stream-ordered pool on its stream (gradients zeroed there where a weight of the unit has no
// storing first writer in the window, else only in the padding and the gaps between tensors, which the reduction
// reads: mark_window_first_gradients) and its stream waits for the ops on other streams that made a buffer it uses; after it, the buffers it closes are freed on its stream, once the
// window's ops on other streams are done. Freed memory goes back to the pool, which the next window reuses, so the
// rank's peak holds the shards plus the windows open at once, as the memory model counts ZeRO-2 and ZeRO-3.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <set>
#include <vector>

#include "executor/gpu/issue_events.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/weight_residency.hpp"

namespace twin::exec {

class WeightResidencyRun {
 public:
  // `parameters` outlives the run; the units `plan` names are sharded there (shards_weights, shards_gradients).
  // `stored`: the units whose every weight's gradient a window's first writer stores.
  WeightResidencyRun(WeightResidency plan, StageParameters& parameters, std::set<std::int32_t> stored);

  // Before op `op` is issued on `stream`: its waits, then its buffers made.
  void before(OpIndex op, cudaStream_t stream, const IssueEvents& events);
  // After it is issued: the buffers it closes freed.
  void after(OpIndex op, cudaStream_t stream);

 private:
  // The unit's whole buffer a change makes or frees (throws for a unit that keeps it whole), and setting it.
  void* buffer_of(const ResidencyChange& change);
  void set_buffer(const ResidencyChange& change, void* buffer);

  WeightResidency plan_;
  StageParameters& parameters_;
  std::set<std::int32_t> stored_;
};

// The units of `parameters` that keep only their shards, as WeightResidency reads them.
ShardedUnits sharded_units(StageParameters& parameters);

}  // namespace twin::exec
