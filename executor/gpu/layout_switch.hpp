// The interpreter's handler of hot switching's switch into a part's layout (StepPart), on a stream of its own: the
// gradients zeroed where the part starts them from zero (every stream waits for `switched()`, recorded then), then
// unit by unit in model order (one NCCL group each) the unit's rectangles (executor/resharding.hpp), its event
// recorded after them; an op touching a unit's weights or gradients waits for that unit's event on its stream
// (wait_for_units), as the simulator lets a unit's first compute wait for its own transfers only. The graph's
// transfer ops (Action::switch_transfer) mark its place. It owns the switch's stream and events.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "core/op_graph.hpp"
#include "executor/gpu/step_part.hpp"
#include "executor/op_binding.hpp"

namespace twin::exec {

class LayoutSwitch {
 public:
  // The switch into `part` on GPU `rank`, into `parameters`.
  LayoutSwitch(const StepPart& part, int rank, std::shared_ptr<StageParameters> parameters);
  ~LayoutSwitch();
  LayoutSwitch(const LayoutSwitch&) = delete;
  LayoutSwitch& operator=(const LayoutSwitch&) = delete;

  bool switches() const { return done_ != nullptr; }
  // Issues the switch after `start` (recorded on `compute`); without one, records `switched()` on `compute`.
  void run(cudaEvent_t start, cudaStream_t compute);
  cudaEvent_t switched() const { return switched_; }
  // Makes `stream` wait for the transfers of the units `op` touches (parameter unit `unit`, or every unit for the
  // optimizer's and a whole stage's ops), once per stream and unit per iteration.
  void wait_for_units(const Op& op, const OpBinding& b, std::int32_t unit, cudaStream_t stream);
  // Makes `compute` wait for the whole switch (the iteration ends after it).
  void join(cudaStream_t compute);
  // After the iteration: from `start` to the last unit's transfers, in seconds.
  double seconds_since(cudaEvent_t start) const;

 private:
  const StepPart part_;
  int rank_ = 0;
  std::shared_ptr<StageParameters> parameters_;
  cudaEvent_t switched_ = nullptr, done_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<std::pair<std::int32_t, std::vector<ReshardBlock>>> units_;
  std::map<std::int32_t, cudaEvent_t> unit_switched_;
  std::set<std::pair<int, std::int32_t>> waited_;  // (stream, unit) waited for this iteration
};

}  // namespace twin::exec
