// Parameter units and shard maps: every TP split of a weight covers the full weight's columns (or rows)
// exactly once, so that a sharded model holds exactly the single-GPU model's values.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "executor/parameters.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "../strategies/per_layer/per_layer_fixture.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

Scenario small() { return testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16); }

// GPT-style as twin execute runs it: LayerNorm, linear biases, learned positions, GeLU, flash attention, no dropout.
Scenario small_gpt() {
  ModelConfig m = testing::gpt_shaped();
  m.num_layers = 4;
  m.attention_backend = AttentionBackend::flash;
  m.hidden_dropout = m.attention_dropout = 0;
  m.add_bias_linear = true;
  return testing::make_scenario(m, 1, 1024, 16);
}

Strategy complete(Strategy s, Scenario scenario = small()) {
  if (auto reason = complete_strategy(scenario, s)) throw std::runtime_error(*reason);
  return s;
}

// The global (row, col) cells a rank's shard covers, for a weight of up to a few million cells.
std::set<std::int64_t> cells(const ShardMap& map) {
  std::set<std::int64_t> out;
  for (std::int64_t r = 0; r < map.local_rows; r += 97)  // a sample of rows keeps the test fast
    for (std::int64_t c = 0; c < map.local_cols; ++c) out.insert(seed_index(map, r, c));
  return out;
}

void expect_tensor_parallel_shards_tile_every_weight(const Scenario& scenario) {
  const Strategy single = complete(testing::make_strategy(1, 1), scenario);
  const Strategy split = complete(testing::make_strategy(2, 1), scenario);
  const auto full = plan_parameter_units(scenario, single, RankPlacement{0, 0, 0}, 7);
  const auto rank0 = plan_parameter_units(scenario, split, RankPlacement{0, 0, 0}, 7);
  const auto rank1 = plan_parameter_units(scenario, split, RankPlacement{1, 0, 0}, 7);
  ASSERT_EQ(full.size(), rank0.size());
  for (std::size_t u = 0; u < full.size(); ++u)
    for (std::size_t t = 0; t < full[u].tensors.size(); ++t) {
      const WeightTensor& whole = full[u].tensors[t];
      std::set<std::int64_t> joined = cells(rank0[u].tensors[t].shard);
      const std::set<std::int64_t> other = cells(rank1[u].tensors[t].shard);
      if (whole.tp_replicated) {
        EXPECT_EQ(joined, other) << whole.name << " is replicated";
        continue;
      }
      for (std::int64_t cell : other) EXPECT_TRUE(joined.insert(cell).second) << whole.name << " cell twice";
      // Row sampling differs between splits of rows; compare on column-split weights exactly.
      if (whole.shard.row_offset == 0 && rank1[u].tensors[t].shard.row_offset == 0)
        EXPECT_EQ(joined, cells(whole.shard)) << whole.name;
      EXPECT_EQ(rank0[u].tensors[t].seed, whole.seed) << whole.name << ": same values on every split";
    }
}

TEST(Parameters, TensorParallelShardsTileEveryWeight) { expect_tensor_parallel_shards_tile_every_weight(small()); }

TEST(Parameters, TensorParallelShardsTileEveryGptWeightBiasesIncluded) {
  expect_tensor_parallel_shards_tile_every_weight(small_gpt());
}

// GPT's layer in Megatron's order: each LayerNorm's weight then bias, each linear's weight then bias; the
// column-parallel biases (QKV, FC1) split as their output columns, the row-parallel ones (projection, FC2) and the
// norms' whole on every TP rank; learned positions [max positions, hidden] whole in the embedding's unit.
TEST(Parameters, GptUnitsHoldLayerNormBiasesAndPositions) {
  const Scenario gpt = small_gpt();
  const ModelConfig& m = gpt.model;
  const Strategy split = complete(testing::make_strategy(2, 1), gpt);
  const auto units = plan_parameter_units(gpt, split, RankPlacement{1, 0, 0}, 3);
  ASSERT_EQ(units.front().id, kEmbeddingUnit);
  const WeightTensor* positions = units.front().find(OpRole::embedding, WeightPart::positions);
  ASSERT_NE(positions, nullptr);
  EXPECT_EQ(positions->rows, m.max_position_embeddings);
  EXPECT_EQ(positions->cols, m.hidden_size);
  EXPECT_TRUE(positions->tp_replicated);
  const ParameterUnitLayout& layer = units.at(1);
  std::vector<std::string> names;
  for (const WeightTensor& w : layer.tensors) names.push_back(w.name);
  EXPECT_EQ(names, (std::vector<std::string>{"L0.input_norm", "L0.input_norm.bias", "L0.qkv", "L0.qkv.bias", "L0.proj",
                                             "L0.proj.bias", "L0.mlp_norm", "L0.mlp_norm.bias", "L0.fc1",
                                             "L0.fc1.bias", "L0.fc2", "L0.fc2.bias"}));
  const std::int64_t h = m.hidden_size;
  for (OpRole role : {OpRole::qkv_projection, OpRole::fc1}) {
    const WeightTensor* bias = layer.find(role, WeightPart::bias);
    ASSERT_NE(bias, nullptr);
    EXPECT_FALSE(bias->tp_replicated) << bias->name;
    EXPECT_EQ(bias->cols, layer.tensor(role).cols) << bias->name;  // this rank's output columns
    EXPECT_EQ(global_column(bias->shard, 0), global_column(layer.tensor(role).shard, 0)) << bias->name;
  }
  EXPECT_EQ(layer.find(OpRole::fc1, WeightPart::bias)->cols, 4 * h / 2);
  for (OpRole role : {OpRole::attention_projection, OpRole::fc2, OpRole::input_norm, OpRole::mlp_norm}) {
    const WeightTensor* bias = layer.find(role, WeightPart::bias);
    ASSERT_NE(bias, nullptr);
    EXPECT_TRUE(bias->tp_replicated) << bias->name;
    EXPECT_EQ(bias->cols, h) << bias->name;
  }
  EXPECT_EQ(units.back().find(OpRole::final_norm, WeightPart::bias)->cols, h);
  // A Llama-style model has none of them.
  const auto llama = plan_parameter_units(small(), complete(testing::make_strategy(2, 1)), RankPlacement{}, 3);
  for (const ParameterUnitLayout& unit : llama)
    for (const WeightTensor& w : unit.tensors) EXPECT_EQ(w.part, WeightPart::weight) << w.name;
}

// Megatron pads the vocabulary to a multiple of 128 x TP (8000: 8064 at TP 1, 8192 at TP 2), so the output layer
// [hidden, vocabulary] is seeded down its columns: every element of the vocabulary starts alike under any TP size
// (an asymmetric plan's pipelines of different TP sizes train one model).
TEST(Parameters, TheOutputLayerStartsAlikeHoweverItsVocabularyIsPadded) {
  Scenario scenario = small();
  scenario.model.vocab_size = 8000;
  const auto output_of = [&](int tp, int tp_rank) {
    for (const ParameterUnitLayout& unit :
         plan_parameter_units(scenario, complete(testing::make_strategy(tp, 1)), RankPlacement{tp_rank, 0, 0}, 7))
      for (const WeightTensor& w : unit.tensors)
        if (w.role == OpRole::output_projection) return w.shard;
    throw std::logic_error("no output layer");
  };
  const ShardMap whole = output_of(1, 0), half = output_of(2, 1);
  ASSERT_EQ(whole.local_cols, 8064);
  ASSERT_EQ(half.local_cols, 4096);  // columns 4096 .. 8191
  int compared = 0;
  for (std::int64_t r = 0; r < whole.local_rows; r += 31)
    for (std::int64_t c = 0; c < 8000 - 4096; c += 7, ++compared)
      ASSERT_EQ(seed_index(half, r, c), seed_index(whole, r, 4096 + c)) << r << ", " << c;
  EXPECT_GT(compared, 1000);
}

TEST(Parameters, UnitsPadToTheDataGroupAndShardContiguously) {
  Strategy s = testing::make_strategy(1, 1);
  s.data_parallel_size = 3;
  s.zero_stage = 1;
  Scenario scenario = small();
  scenario.cluster.node_groups[0].gpus_per_node = 3;
  scenario.training.global_batch_size = 12;
  ASSERT_FALSE(complete_strategy(scenario, s).has_value());
  for (int dp = 0; dp < 3; ++dp)
    for (const ParameterUnitLayout& unit : plan_parameter_units(scenario, s, RankPlacement{0, dp, 0}, 1)) {
      EXPECT_EQ(unit.padded % 3, 0);
      EXPECT_GE(unit.padded, unit.elements);
      EXPECT_LT(unit.padded - unit.elements, 3);
      EXPECT_EQ(unit.shard_begin, dp * unit.padded / 3);
      EXPECT_TRUE(unit.sharded_optimizer);
      EXPECT_EQ(unit.update_elements(), unit.padded / 3);
    }
}

// The elements [begin, end) a list of ranges covers, merged where they touch.
std::vector<std::pair<std::int64_t, std::int64_t>> merged_intervals(
    std::vector<std::pair<std::int64_t, std::int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& [begin, end] : intervals)
    if (begin >= end) continue;
    else if (!out.empty() && begin <= out.back().second) out.back().second = std::max(out.back().second, end);
    else out.emplace_back(begin, end);
  return out;
}

// The gradient-norm ranges cover exactly the elements the per-tensor count did: every tensor's part in the
// rank's shard, norm weights only where counted; in one run per unit when nothing is left out. Compared as
// intervals (a unit holds millions of elements): the ranges are disjoint, and within the unit's tensors they
// cover what the count covers; beyond them (padding, zeros) a range may run.
TEST(Parameters, GradientNormRangesCoverTheCountedTensorsInFewRuns) {
  for (Scenario scenario : {small(), small_gpt()}) {
    Strategy s = testing::make_strategy(2, 1);
    s.data_parallel_size = 3;
    s.zero_stage = 1;
    s.sequence_parallel = true;
    scenario.cluster.node_groups[0].gpus_per_node = 6;
    scenario.training.global_batch_size = 12;
    ASSERT_FALSE(complete_strategy(scenario, s).has_value());
    for (int dp = 0; dp < 3; ++dp)
      for (const ParameterUnitLayout& unit : plan_parameter_units(scenario, s, RankPlacement{1, dp, 0}, 1))
        for (bool count_replicated : {true, false}) {
          const std::int64_t shard_end = unit.shard_begin + unit.shard_elements;
          std::vector<std::pair<std::int64_t, std::int64_t>> expected, got, got_in_tensors;
          for (const WeightTensor& w : unit.tensors)
            if (count_replicated || !w.tp_replicated)
              expected.emplace_back(std::max(w.offset, unit.shard_begin),
                                    std::min(w.offset + w.elements(), shard_end));
          const std::vector<ElementRange> ranges = gradient_norm_ranges(unit, count_replicated);
          for (const ElementRange& r : ranges) {
            EXPECT_GE(r.begin, 0) << unit.id;
            EXPECT_LE(r.begin + r.count, unit.padded) << unit.id;
            got.emplace_back(r.begin, r.begin + r.count);
            got_in_tensors.emplace_back(r.begin, std::min(r.begin + r.count, unit.elements));
          }
          std::sort(got.begin(), got.end());
          for (std::size_t i = 1; i < got.size(); ++i)
            EXPECT_LE(got[i - 1].second, got[i].first) << unit.id << ": ranges overlap";
          EXPECT_EQ(merged_intervals(got_in_tensors), merged_intervals(expected)) << unit.id;
          int norms = 0;
          for (const WeightTensor& w : unit.tensors) norms += w.tp_replicated;
          EXPECT_LE(ranges.size(), count_replicated ? 1u : static_cast<std::size_t>(norms + 1)) << unit.id;
        }
  }
}

// Korthikanti's GPT runs (unfused attention since 2026-12-03); with sinks, which unfused attention does not run, not.
TEST(Parameters, RefusesModelsTheExecutorDoesNotRun) {
  ModelConfig model = testing::gpt_shaped();
  model.attention_sinks = true;
  Scenario gpt = testing::make_scenario(model, 1, 1024, 16);
  Strategy s = testing::make_strategy(1, 1);
  ASSERT_FALSE(complete_strategy(gpt, s).has_value());
  EXPECT_THROW(plan_parameter_units(gpt, s, RankPlacement{}, 1), std::invalid_argument);
}

// An MoE layer's unit: the attention's weights and the router [hidden, experts] (replicated over TP, as a norm
// weight), beside an experts unit with each expert's fc1 and fc2 stacked; as many weights as the memory model
// counts (plan_parameter_units checks the sums).
TEST(Parameters, AnMoeLayerHoldsItsRouterAndExpertStacks) {
  Scenario moe = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);
  moe.cluster.node_groups[0].gpus_per_node = 2;
  Strategy s = testing::make_strategy(1, 2, 1, false);
  ASSERT_FALSE(complete_strategy(moe, s).has_value());
  const auto units = plan_parameter_units(moe, s, RankPlacement{0, 0, 1}, 7);
  const ModelConfig& m = moe.model;
  int layers = 0, expert_units = 0;
  for (const ParameterUnitLayout& unit : units) {
    if (unit.id <= kExpertUnitBase) {
      ++expert_units;
      EXPECT_EQ(unit.replicas, GroupKind::expert_data);
      EXPECT_EQ(unit.tensor(OpRole::expert_fc1).rows, m.moe.num_experts * m.hidden_size);
      EXPECT_EQ(unit.tensor(OpRole::expert_fc1).cols, 2 * m.moe.ffn_hidden_size);  // SwiGLU: gate and up
      EXPECT_EQ(unit.tensor(OpRole::expert_fc2).rows, m.moe.num_experts * m.moe.ffn_hidden_size);
      EXPECT_EQ(unit.tensor(OpRole::expert_fc2).cols, m.hidden_size);
      continue;
    }
    if (unit.id < 0) continue;
    ++layers;
    EXPECT_EQ(unit.replicas, GroupKind::data);
    EXPECT_EQ(unit.tensor(OpRole::router).rows, m.hidden_size);
    EXPECT_EQ(unit.tensor(OpRole::router).cols, m.moe.num_experts);
    EXPECT_TRUE(unit.tensor(OpRole::router).tp_replicated);
    EXPECT_THROW(unit.tensor(OpRole::fc1), std::logic_error);
    EXPECT_THROW(unit.tensor(OpRole::expert_fc1), std::logic_error);
  }
  EXPECT_EQ(layers, 2);  // the second of two stages
  EXPECT_EQ(expert_units, 2);
}

// Under expert parallelism each EP rank holds its own experts (rows of the full stacks, tiling them exactly
// once over the group), sharded for ZeRO over the expert-data group by its place there.
TEST(Parameters, ExpertParallelRanksTileTheExpertStacks) {
  Scenario moe = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);  // 8 GPUs
  // (tp, ep, sp, cp): under CP the expert groups span the CP ranks as they span data-parallel ones.
  for (auto [tp, ep, sp, cp] : {std::tuple{1, 2, false, 1}, std::tuple{2, 4, true, 1}, std::tuple{1, 8, false, 1},
                                std::tuple{2, 1, true, 1}, std::tuple{1, 2, false, 2}, std::tuple{2, 4, true, 2}}) {
    Strategy s = testing::make_strategy(tp, 1, cp, sp);
    s.expert_model_parallel_size = ep;
    s.zero_stage = 1;
    ASSERT_FALSE(complete_strategy(moe, s).has_value()) << s.key();
    const int edp = expert_data_parallel_size(s);
    std::map<std::int32_t, std::set<std::int64_t>> rows_covered;  // per layer: fc1 stack rows held
    std::map<std::pair<std::int32_t, int>, int> shard_owners;      // (layer, ep rank) -> ranks, by shard place
    for (int rank = 0; rank < s.world_size(); ++rank) {
      const RankPlacement placement = placement_of(s, rank);
      EXPECT_EQ(placement.ep_rank, rank % ep) << s.key();  // EP groups are a stage's innermost ranks
      for (const ParameterUnitLayout& unit : plan_parameter_units(moe, s, placement, 1)) {
        if (unit.id > kExpertUnitBase) continue;
        const WeightTensor& fc1 = unit.tensor(OpRole::expert_fc1);
        EXPECT_EQ(fc1.rows, moe.model.moe.num_experts / ep * moe.model.hidden_size);
        EXPECT_TRUE(unit.sharded_optimizer == (edp > 1)) << s.key();
        EXPECT_EQ(unit.padded % edp, 0);
        EXPECT_EQ(unit.shard_begin, unit.shard_elements * placement.expert_data_rank);
        for (std::int64_t r = 0; r < fc1.rows; ++r) rows_covered[unit.id].insert(fc1.shard.row_offset + r);
        shard_owners[{unit.id, placement.ep_rank}] |= 1 << placement.expert_data_rank;
      }
    }
    for (const auto& [unit, rows] : rows_covered) {
      EXPECT_EQ(static_cast<std::int64_t>(rows.size()), moe.model.moe.num_experts * moe.model.hidden_size) << s.key();
      EXPECT_EQ(*rows.rbegin(), moe.model.moe.num_experts * moe.model.hidden_size - 1);
    }
    for (const auto& [key, owners] : shard_owners) EXPECT_EQ(owners, (1 << edp) - 1) << s.key();  // every shard once
  }
}

// Tied embeddings: on the embedding's stage the output layer holds only its norm (it uses the table); on the
// last of two stages it holds a copy of the table, laid out and initialised as the table, and left out of the
// gradient norm.
// Under ZeRO over data-parallel ranks the table and its copy start their units, which are padded alike: every
// data-parallel rank holds the same elements of both, so their gradients sum shard by shard.
// With learned positions (GPT) the table's unit is the larger one: the copy's is padded as it.
TEST(Parameters, TiedTableAndCopyShardAlike) {
  for (Scenario tied : {small(), small_gpt()}) {
    tied.model.untie_embeddings_and_output_weights = false;
    tied.cluster.node_groups[0].gpus_per_node = 4;
    for (int zero : {1, 3}) {
      Strategy s = testing::make_strategy(1, 2, 1, false);
      s.zero_stage = zero;
      ASSERT_FALSE(complete_strategy(tied, s).has_value());
      ASSERT_EQ(s.data_parallel_size, 2);
      for (int dp = 0; dp < 2; ++dp) {
        const auto first = plan_parameter_units(tied, s, RankPlacement{0, dp, 0}, 3);
        const auto last = plan_parameter_units(tied, s, RankPlacement{0, dp, 1}, 3);
        const ParameterUnitLayout& table_unit = first.front();
        const ParameterUnitLayout& copy_unit = last.back();
        ASSERT_EQ(table_unit.id, kEmbeddingUnit);
        ASSERT_EQ(copy_unit.id, kHeadUnit);
        EXPECT_EQ(table_unit.tensor(OpRole::embedding).offset, 0);
        EXPECT_EQ(copy_unit.tensor(OpRole::output_projection).offset, 0);
        EXPECT_EQ(table_unit.padded, copy_unit.padded);
        EXPECT_EQ(table_unit.shard_begin, copy_unit.shard_begin);
        EXPECT_EQ(table_unit.shard_elements, copy_unit.shard_elements);
        EXPECT_TRUE(table_unit.sharded_optimizer && copy_unit.sharded_optimizer);
      }
    }
  }
}

TEST(Parameters, TiedEmbeddingsShareTheTableOrCopyIt) {
  Scenario tied = small();
  tied.model.untie_embeddings_and_output_weights = false;
  Strategy one = testing::make_strategy(1, 1, 1, false);
  ASSERT_FALSE(complete_strategy(tied, one).has_value());
  const auto single = plan_parameter_units(tied, one, RankPlacement{}, 3);
  EXPECT_EQ(single.back().id, kHeadUnit);
  ASSERT_EQ(single.back().tensors.size(), 1u);
  EXPECT_EQ(single.back().tensors[0].role, OpRole::final_norm);

  Strategy two = testing::make_strategy(1, 2, 1, false);
  ASSERT_FALSE(complete_strategy(tied, two).has_value());
  const auto first = plan_parameter_units(tied, two, RankPlacement{0, 0, 0}, 3);
  const auto last = plan_parameter_units(tied, two, RankPlacement{0, 0, 1}, 3);
  const WeightTensor& table = first.front().tensor(OpRole::embedding);
  const WeightTensor& copy = last.back().tensor(OpRole::output_projection);
  EXPECT_TRUE(copy.embedding_copy);
  EXPECT_FALSE(table.embedding_copy);
  EXPECT_EQ(copy.rows, table.rows);
  EXPECT_EQ(copy.cols, table.cols);
  EXPECT_EQ(copy.seed, table.seed);
  EXPECT_EQ(copy.init_stddev, table.init_stddev);
  EXPECT_EQ(cells(copy.shard), cells(table.shard));
  for (const ElementRange& r : gradient_norm_ranges(last.back(), true))
    EXPECT_TRUE(r.begin + r.count <= copy.offset || r.begin >= copy.offset + copy.elements()) << r.begin;
}

// A per-layer plan over 2 stages of 2 GPUs, split 1 + 3: each unit is laid out as the uniform strategy of its
// layer's layout lays it out (tp 1 layers whole on each GPU and sharded by ZeRO over both, tp 2 layers split
// over both), the embedding as the first layer, the output layer as the last.
TEST(Parameters, PerLayerUnitsTakeTheirLayersLayoutsAndTheStageSplit) {
  Scenario scenario = small();  // 4 layers, 16 sequences
  scenario.cluster.node_groups[0].gpus_per_node = 4;
  const PerLayerPlan plan =
      testing::per_layer_plan(2, 2, 8, {1, 3},
                              {{{1, false}, 1, Recompute::none}, {{2, false}, 0, Recompute::none},
                               {{2, false}, 1, Recompute::full}, {{1, false}, 0, Recompute::selective}});
  const PlanPart part = per_layer_part(scenario, plan, home_strategy(scenario, plan));
  std::map<int, std::vector<std::set<std::int64_t>>> qkv_cells;  // layer -> each rank's qkv cells
  for (int rank = 0; rank < 4; ++rank) {
    const int stage = rank / 2;
    const std::vector<ParameterUnitLayout> units = plan_parameter_units(part, rank, 7);
    std::vector<std::int32_t> ids;
    for (const ParameterUnitLayout& unit : units) ids.push_back(unit.id);
    EXPECT_EQ(ids, stage == 0 ? std::vector<std::int32_t>({kEmbeddingUnit, 0})
                              : std::vector<std::int32_t>({1, 2, 3, kHeadUnit}));
    for (const ParameterUnitLayout& unit : units) {
      const Strategy& s = part.unit_strategy(unit.id);
      const int layer = unit.id == kEmbeddingUnit ? 0 : unit.id == kHeadUnit ? 3 : unit.id;
      EXPECT_EQ(s.tensor_model_parallel_size, plan.layers[static_cast<std::size_t>(layer)].layout.group);
      const RankPlacement placement = placement_of(s, rank);
      EXPECT_EQ(unit.sharded_optimizer, s.zero_stage >= 1 && s.data_parallel_size > 1) << unit.id;
      EXPECT_EQ(unit.padded % s.data_parallel_size, 0);
      EXPECT_EQ(unit.shard_begin, placement.dp_rank * unit.padded / s.data_parallel_size);
      if (unit.id < 0) continue;
      EXPECT_EQ(unit.elements,
                layer_parameters_per_rank(scenario.model, unit.id, s.tensor_model_parallel_size, 1).dense);
      qkv_cells[unit.id].push_back(cells(unit.tensor(OpRole::qkv_projection).shard));
      // As the uniform strategy of its layout lays out the same layer on the same stage (even split: 2 + 2).
      if ((unit.id == 0 && stage == 0) || (unit.id == 2 && stage == 1)) {
        for (const ParameterUnitLayout& uniform : plan_parameter_units(scenario, s, placement, 7))
          if (uniform.id == unit.id) {
            EXPECT_EQ(uniform.padded, unit.padded);
            EXPECT_EQ(uniform.shard_begin, unit.shard_begin);
            ASSERT_EQ(uniform.tensors.size(), unit.tensors.size());
            for (std::size_t t = 0; t < unit.tensors.size(); ++t) {
              EXPECT_EQ(uniform.tensors[t].seed, unit.tensors[t].seed);
              EXPECT_EQ(uniform.tensors[t].offset, unit.tensors[t].offset);
              EXPECT_EQ(cells(uniform.tensors[t].shard), cells(unit.tensors[t].shard));
            }
          }
      }
    }
  }
  // tp 1 layers: each GPU holds the whole qkv; tp 2 layers: the two GPUs' halves tile it.
  for (int layer : {0, 3}) EXPECT_EQ(qkv_cells[layer][0], qkv_cells[layer][1]) << layer;
  for (int layer : {1, 2}) {
    std::set<std::int64_t> joined = qkv_cells[layer][0];
    for (std::int64_t cell : qkv_cells[layer][1]) EXPECT_TRUE(joined.insert(cell).second);
    EXPECT_EQ(joined, qkv_cells[3][0]) << layer;
  }
}

}  // namespace
}  // namespace twin::exec
