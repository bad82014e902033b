// Re-sharding between two strategies' layouts (HotSPa's switch planner): which elements of each switch unit
// (the embedding, every layer, the output layer) each GPU owns under TP / PP / DP(+CP) / ZeRO, the bytes each
// GPU must receive to hold its new shard, and who sends them: an owner on the receiver's node when there
// is one, else any owner, each time the one with the fewest bytes assigned so far (HotSPa's NEW_GREEDY).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/model.hpp"
#include "core/strategy.hpp"
#include "core/units.hpp"
#include "strategies/layout_switch.hpp"

namespace twin {

// A unit switched as one: its TP-sharded elements (split into tp contiguous ranges, as Megatron's column-
// and row-parallel weights are along their one split dimension) and its replicated ones (norms, row-
// parallel biases, learned positions). The vocabulary is counted unpadded: padding rows carry no values.
struct SwitchUnit {
  std::string name;          // "embedding", "layer 3", "output"
  int layer = -1;            // transformer layer, -1 for the embedding and the output layer
  bool output = false;       // final norm + output projection (on the last stage)
  std::int64_t tp_split_elements = 0;
  std::int64_t replicated_elements = 0;
};
std::vector<SwitchUnit> switch_units(const ModelConfig& model);  // embedding, layers 0..L-1, output

inline constexpr int kSwitchParamBytes = 2;     // the bf16 compute copy of the weights
inline constexpr int kSwitchGradientBytes = 4;  // accumulated gradients (fp32, HotSPa's BF16->FP32 map)

// What a GPU holds of `unit` under `strategy` (data_parallel_size derived): bf16 weights are replicated over
// the data(+context) group unless ZeRO-3; gradients after the phase's reduction are sharded over it under
// ZeRO >= 1 (reduce-scatter) and replicated under ZeRO-0 (all-reduce). Zero when its stage lacks the unit.
std::int64_t owned_elements(const ModelConfig& model, const Strategy& strategy, const SwitchUnit& unit, int rank,
                            bool gradient);
struct SwitchTransfer {
  int unit = 0;              // index into switch_units()
  bool gradient = false;     // accumulated gradients, else bf16 weights
  int from_rank = 0;
  int to_rank = 0;
  Bytes bytes = 0;
  bool operator==(const SwitchTransfer&) const = default;
};

struct SwitchPlan {
  std::vector<SwitchTransfer> transfers;   // ordered by unit, weights before gradients, sender, receiver
  std::vector<Bytes> sent_bytes;           // per rank
  std::vector<Bytes> received_bytes;       // per rank
  Bytes intra_node_bytes = 0;
  Bytes inter_node_bytes = 0;
  Bytes total_bytes() const { return intra_node_bytes + inter_node_bytes; }
  Bytes max_received_bytes() const;
};

// The switch from layout `from` to layout `to` (both complete, same world size): the bf16 weights always,
// the accumulated gradients when `with_gradients`. Slices a GPU already holds stay (zero-copy). Gradients, as
// `from`'s reduction left them, go to one GPU of each of `to`'s reduction groups (the shard's owner under ZeRO
// >= 1, the group's first GPU under ZeRO-0): they are the initial value the phase accumulates into, which its
// own reduction then adds in once (reduction_target; the other GPUs of the group start from zero).
SwitchPlan plan_switch(const ModelConfig& model, const Cluster& cluster, const Strategy& from, const Strategy& to,
                       bool with_gradients);

}  // namespace twin
