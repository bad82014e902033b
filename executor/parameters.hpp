// The layout of the weights one rank holds, grouped in units as the op graph reduces and gathers them
// (the embedding, each layer, the output layer): per unit its tensors at their offsets in the unit's flat
// buffers, where each tensor's shard lies in the full weight, and the part of the unit this rank updates
// (all of it, or its ZeRO shard). Every weight is initialised by global index, so any TP/PP/DP split holds
// the single-GPU model. Plain values, no GPU: executor/gpu/stage_parameters.hpp allocates the buffers.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/op.hpp"
#include "core/scenario.hpp"
#include "core/shard_map.hpp"
#include "strategies/families/plan_graphs.hpp"

namespace twin::exec {

// Which part of its layer a tensor is: a weight (a linear's, a norm's, a table), a bias (a linear's or a LayerNorm's,
// initialised to zeros), learned absolute positions (the embedding's, GPT) or attention's learned sinks (gpt-oss's, one
// logit per query head, initialised to zeros; core attention's).
enum class WeightPart : std::uint8_t { weight, bias, positions, sinks };

struct WeightTensor {
  std::string name;         // "L3.qkv", "embedding", "output", "L3.input_norm", "L3.qkv.bias", "positions", "L3.sinks"
  OpRole role = OpRole::none;
  std::int64_t rows = 0, cols = 0;  // this rank's shard; linears as [in, out] (y = x W)
  std::int64_t offset = 0;  // elements into the unit's flat buffers
  // Replicated over TP (norm weights, the router): its gradient is summed over TP under SP, counted once in norms.
  bool tp_replicated = false;
  // ... and each TP rank's gradient of it is partial with or without SP (QK-norm's weights: each rank's heads add
  // to them), so it is summed over TP always, as Megatron's finalize_model_grads does for q_layernorm and k_layernorm.
  bool tp_partial_gradient = false;
  // Tied embeddings: the output layer's copy of the embedding table on a stage without the embedding
  // ([vocab, hidden] as the table, initialised as the table; its gradient is summed with the table's over the
  // embedding group, and it is left out of the gradient norm, which counts the table once).
  bool embedding_copy = false;
  WeightPart part = WeightPart::weight;
  ShardMap shard;           // where the shard lies in the full weight
  float init_stddev = 0;    // 0: ones (norm weights), zeros for a bias; else drawn normal (the router's bias too)
  std::uint64_t seed = 0;
  std::int64_t elements() const { return rows * cols; }
};

// An MoE layer's experts form a unit of their own beside the layer's (which holds its attention, norms and
// router): they are replicated over the expert-data group, not the data group, so they are reduced, sharded and
// gathered over it. The op graph names both by the layer; the op's group says which.
inline constexpr std::int32_t kExpertUnitBase = -1000;
constexpr std::int32_t expert_unit_of(std::int32_t layer) { return kExpertUnitBase - layer; }

struct ParameterUnitLayout {
  std::int32_t id = kNoParameterUnit;  // layer index, kEmbeddingUnit, kHeadUnit or expert_unit_of(layer)
  // The ranks that hold the same weights and see other tokens: GroupKind::data (dp*cp ranks), or for an
  // experts unit GroupKind::expert_data.
  GroupKind replicas = GroupKind::data;
  std::vector<WeightTensor> tensors;
  std::int64_t elements = 0;           // sum of the tensors
  std::int64_t padded = 0;             // rounded up to a multiple of the replicas group (ZeRO shards)
  std::int64_t shard_begin = 0, shard_elements = 0;  // this rank's 1/replicas of `padded`
  bool sharded_optimizer = false;      // ZeRO >= 1: master and moments only for the shard
  int zero_stage = 0;                  // the unit's strategy's (a per-layer plan's layers each have their own)
  // The elements this rank updates (holds fp32 master weights and AdamW moments for).
  std::int64_t update_begin() const { return sharded_optimizer ? shard_begin : 0; }
  std::int64_t update_elements() const { return sharded_optimizer ? shard_elements : padded; }
  // Whether the rank keeps only its shard of the unit's gradients (ZeRO >= 2) or weights (ZeRO-3) between the ops
  // that need them whole (executor/weight_residency.hpp): sharded over more than one GPU, and not empty.
  bool shards_gradients() const { return sharded_optimizer && zero_shards_gradients(zero_stage) && padded > 0; }
  bool shards_weights() const { return sharded_optimizer && zero_shards_weights(zero_stage) && padded > 0; }
  const WeightTensor& tensor(OpRole role) const;  // the weight of `role`
  // The `part` of `role` the unit holds, or nullptr (a model without biases or learned positions).
  const WeightTensor* find(OpRole role, WeightPart part) const;
};

struct RankPlacement {
  int tp_rank = 0, dp_rank = 0, stage = 0;
  // Under expert parallelism: which experts the rank holds (its place in its expert group) and its place in
  // the expert-data group (the ZeRO shard of its experts unit). strategies/rank_layout.hpp derives both.
  int ep_rank = 0, expert_data_rank = 0;
};
// A rank's placement from its global rank (strategies/rank_layout.hpp's groups).
RankPlacement placement_of(const Strategy& strategy, int rank);

// A range [begin, begin + count) of a unit's flat buffers.
struct ElementRange {
  std::int64_t begin = 0, count = 0;
  bool operator==(const ElementRange&) const = default;
};

// The columns TP rank `rank` of `tp` holds of the QKV projection's output row, [Q heads | K groups | V groups]
// each head `d` wide, given its `heads_local` query heads and `groups_local` key-value groups: for Q, K and V,
// where its block starts in the whole row and how wide it is. The same blocks are what GPU `rank` of a Ulysses
// group holds around attention (executor/gpu/ulysses_exchange.cpp).
struct ColumnBlock {
  std::int64_t first_column = 0, width = 0;
};
std::array<ColumnBlock, 3> qkv_column_blocks(std::int64_t heads_local, std::int64_t groups_local, std::int64_t d,
                                             int tp, int rank);

// What this rank adds to the global gradient norm from `unit`: its 1/dp part of the buffer
// ([shard_begin, shard_begin + shard_elements)), without the tensors replicated over TP unless
// `count_replicated` (TP rank 0 counts them once) and without an embedding copy (the table counts it), in as
// few contiguous runs as those tensors allow (one
// for the whole part when none is left out: one kernel launch instead of one per tensor). Gaps between
// tensors and the padding hold zero gradients.
std::vector<ElementRange> gradient_norm_ranges(const ParameterUnitLayout& unit, bool count_replicated);

// The elements of a unit's flat buffer no tensor covers (the gaps between tensors, the padding), in order: what a
// gradient buffer must hold as zeros where every tensor's first writer stores (executor/weight_residency.hpp).
std::vector<ElementRange> uncovered_ranges(const ParameterUnitLayout& unit);

// The units a rank of `placement.stage` holds, their tensors and shard maps: Llama-style models (RMSNorm, SwiGLU or
// GeLU, RoPE; an MoE layer's unit holds its router, replicated over TP as the norms are, and its experts unit the
// rank's experts' fc1 and fc2 stacked) and GPT-style dense ones (LayerNorm weight and bias, linear biases: a
// column-parallel linear's sharded as its output columns, a row-parallel one's replicated over TP as the norms
// are; learned positions in the embedding's unit, replicated over TP); throws std::invalid_argument for the
// features executor/model_support.hpp lists. With tied embeddings the output layer
// holds no weight of its own on the embedding's stage (it uses the table) and a copy of the table elsewhere.
// Whether a stage holds the embedding: stage_holds_embedding.
bool stage_holds_embedding(const Strategy& strategy, int stage);
std::vector<ParameterUnitLayout> plan_parameter_units(const Scenario& scenario, const Strategy& strategy,
                                                      const RankPlacement& placement, std::uint64_t seed);
// The units global rank `rank` holds in `part`: each laid out as above under the strategy it runs as
// (PlanPart::unit_strategy: a per-layer plan's layers each under their own TP, data group and ZeRO stage) at the
// rank's place in that strategy's groups, the stage's layers as the part splits them.
std::vector<ParameterUnitLayout> plan_parameter_units(const PlanPart& part, int rank, std::uint64_t seed);

}  // namespace twin::exec
