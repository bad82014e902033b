// What a switch between two parameter layouts of the same GPUs needs beside the layouts themselves, shared by the
// hot-switching family's planner (strategies/hot_switch/hot_switch_resharding.hpp) and twin execute's re-sharding
// (executor/resharding.hpp): whether two layouts hold the same, where a reduction group's gradients start a
// phase, and who sends a piece a GPU lacks. Here, below every plan family, so that the executor names no family.
#pragma once
#include <vector>

#include "core/cluster.hpp"
#include "core/strategy.hpp"
#include "core/units.hpp"

namespace twin {

// Whether `rank` is where its reduction group's accumulated gradients start a phase under `strategy`: every GPU
// under ZeRO >= 1 (each its shard), the group's first GPU under ZeRO-0.
bool reduction_target(const Strategy& strategy, int rank);

// Who sends a piece a GPU lacks (HotSPa's NEW_GREEDY): an owner on the receiver's node when there is one, else
// any owner, each time the one with the fewest bytes assigned so far in that class (intra- or inter-node), the
// lowest rank on a tie. The simulator's switch plan and twin execute's (executor/resharding.hpp) both choose so.
class SwitchSenders {
 public:
  SwitchSenders(const Cluster& cluster, int world);
  // The sender of `bytes` to `receiver` among `owners` (not empty); `intra`: whether it is on the receiver's node.
  int choose(const std::vector<int>& owners, int receiver, Bytes bytes, bool& intra);

 private:
  const Cluster& cluster_;
  std::vector<Bytes> intra_, inter_;
};

// Whether two layouts shard weights, gradients and optimizer states alike (same TP, PP, CP, EP, DP, model
// chunks, ZeRO stage and folding): then a switch moves nothing and gradients accumulate in one buffer.
bool same_parameter_layout(const Strategy& a, const Strategy& b);

}  // namespace twin
