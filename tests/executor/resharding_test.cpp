// The switch between two layouts, run on the CPU: every rank's buffers of the layout before filled with each
// element's identity in the full weight, the plan's blocks copied, and every rank's buffers after compared with
// the identities they must hold (weights where the rank holds them, gradients at the reduction's target only).
// The bytes that cross between GPUs are the simulator's switch plan's, where both cut the weights alike.
#include "executor/resharding.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/parameters.hpp"
#include "strategies/hot_switch/hot_switch_resharding.hpp"
#include "strategies/validity.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

constexpr std::int64_t kNone = -1;

PlanPart part_of(const Scenario& scenario, int tp, int pp, int zero) {
  PlanPart part;
  part.scenario = scenario;
  part.strategy = testing::make_strategy(tp, pp);
  part.strategy.zero_stage = zero;
  part.strategy.micro_batch_size = 1;
  if (auto reason = complete_strategy(part.scenario, part.strategy)) throw std::runtime_error(*reason);
  return part;
}

// A small Llama-shaped model (GQA, SwiGLU, untied) whose vocabulary is padded alike at TP 1 to 8, by default.
Scenario on_gpus(int gpus, std::int64_t vocab = 2048) {
  ModelConfig m = testing::llama_shaped(4);
  m.hidden_size = 256;
  m.num_attention_heads = 16;
  m.kv_channels = 16;
  m.num_query_groups = 8;
  m.ffn_hidden_size = 704;
  m.vocab_size = vocab;
  Scenario scenario = testing::make_scenario(m, 1, 1024, 16);
  scenario.cluster.node_groups[0].gpus_per_node = gpus;
  return scenario;
}

// A weight element's identity: tensor, row, column (unique across the model's tensors).
std::int64_t identity_code(const std::string& name) {
  return static_cast<std::int64_t>(std::hash<std::string>{}(name) % 1000);
}
std::int64_t identity(const std::string& name, std::int64_t row, std::int64_t col) {
  return identity_code(name) * 1'000'000'000'000 + row * 100'000 + col;
}

// Whether the element `id` is vocabulary padding of a model of `vocabulary` (the table's rows, the untied output
// layer's [hidden, vocab] columns from it on).
bool is_vocabulary_padding(std::int64_t id, std::int64_t vocabulary) {
  static const std::int64_t table = identity_code("embedding"), output = identity_code("output");
  const std::int64_t code = id / 1'000'000'000'000, row = id % 1'000'000'000'000 / 100'000, col = id % 100'000;
  return (code == table && row >= vocabulary) || (code == output && col >= vocabulary);
}

// Per rank, per unit: one buffer of `padded` elements, kNone where nothing valid lies; `valid` picks the range.
using Buffers = std::vector<std::map<std::int32_t, std::vector<std::int64_t>>>;
template <class Valid>
Buffers fill(const PlanPart& part, int world, Valid valid) {
  Buffers out(world);
  for (int rank = 0; rank < world; ++rank)
    for (const ParameterUnitLayout& unit : plan_parameter_units(part, rank, 0)) {
      std::vector<std::int64_t>& buffer = out[rank][unit.id];
      buffer.assign(static_cast<std::size_t>(unit.padded), kNone);
      const auto [begin, end] = valid(unit);
      for (const WeightTensor& w : unit.tensors)
        for (std::int64_t r = 0; r < w.rows; ++r)
          for (std::int64_t c = 0; c < w.cols; ++c) {
            const std::int64_t at = w.offset + r * w.cols + c;
            if (at < begin || at >= end) continue;
            std::int64_t global_col = -1;
            for (int s = 0; s < w.shard.segments; ++s)
              if (c >= w.shard.local_begin[s] && c < w.shard.local_begin[s] + w.shard.width[s])
                global_col = w.shard.global_begin[s] + c - w.shard.local_begin[s];
            buffer[static_cast<std::size_t>(at)] = identity(w.name, w.shard.row_offset + r, global_col);
          }
    }
  return out;
}

std::pair<std::int64_t, std::int64_t> whole(const ParameterUnitLayout& unit) { return {0, unit.padded}; }

// Runs the switch on the CPU and checks every rank's weights (and gradients) after it: each element the new layout
// needs from the one before; vocabulary padding that no GPU held before is written by no block (the receiver keeps
// its own there, its gradients start from zero). Returns how many such padding elements were left.
std::int64_t expect_switch_delivers(const PlanPart& from, const PlanPart& to, bool gradients) {
  const int world = to.strategy.world_size();
  const std::vector<ReshardBlock> blocks = plan_resharding(from, to, to.scenario.cluster, gradients);
  std::int64_t left = 0;
  const auto weights_valid = [](const PlanPart& part) {
    return [&part](const ParameterUnitLayout& unit) {
      return part.strategy.zero_stage >= 3 && unit.sharded_optimizer
                 ? std::pair<std::int64_t, std::int64_t>{unit.shard_begin, unit.shard_begin + unit.shard_elements}
                 : whole(unit);
    };
  };
  const auto reduced = [](const ParameterUnitLayout& unit) {  // after the reduction of the part before
    return unit.sharded_optimizer
               ? std::pair<std::int64_t, std::int64_t>{unit.shard_begin, unit.shard_begin + unit.shard_elements}
               : whole(unit);
  };
  for (bool gradient : {false, true}) {
    if (gradient && !gradients) continue;
    const Buffers before = gradient ? fill(from, world, reduced) : fill(from, world, weights_valid(from));
    const Buffers expected =
        gradient ? fill(to, world, gradient_start_range) : fill(to, world, weights_valid(to));
    Buffers after = fill(to, world, [](const ParameterUnitLayout&) { return std::pair<std::int64_t, std::int64_t>{0, 0}; });
    std::vector<std::int64_t> padding_before;  // the padding elements held before, sorted
    const std::int64_t vocabulary = to.scenario.model.vocab_size;
    for (const auto& units : before)
      for (const auto& [unit, buffer] : units)
        for (std::int64_t id : buffer)
          if (id != kNone && is_vocabulary_padding(id, vocabulary)) padding_before.push_back(id);
    std::sort(padding_before.begin(), padding_before.end());
    for (const ReshardBlock& b : blocks) {
      if (b.gradient != gradient) continue;
      const std::vector<std::int64_t>& source = before.at(b.from_rank).at(b.unit);
      std::vector<std::int64_t>& target = after.at(b.to_rank).at(b.unit);
      for (std::int64_t r = 0; r < b.rows; ++r)
        for (std::int64_t c = 0; c < b.cols; ++c) {
          // Plain comparisons in the loops (millions of elements), one failure reported, then the check ends.
          const std::int64_t value = source.at(static_cast<std::size_t>(b.from_first + r * b.from_ld + c));
          std::int64_t& slot = target.at(static_cast<std::size_t>(b.to_first + r * b.to_ld + c));
          if (value == kNone) ADD_FAILURE() << "rank " << b.from_rank << " sends an element it does not hold";
          if (slot != kNone) ADD_FAILURE() << "rank " << b.to_rank << " receives an element twice";
          if (value == kNone || slot != kNone) return left;
          slot = value;
        }
    }
    for (int rank = 0; rank < world; ++rank)
      for (const auto& [unit, buffer] : expected[rank]) {
        const std::vector<std::int64_t>& got = after[rank].at(unit);
        for (std::size_t i = 0; i < buffer.size(); ++i) {
          const bool new_padding = buffer[i] != kNone && is_vocabulary_padding(buffer[i], vocabulary) &&
                                   !std::binary_search(padding_before.begin(), padding_before.end(), buffer[i]);
          left += new_padding;
          if (got[i] == (new_padding ? kNone : buffer[i])) continue;
          EXPECT_EQ(got[i], new_padding ? kNone : buffer[i]) << (gradient ? "gradients" : "weights") << ", rank "
                                                              << rank << ", unit " << unit << ", element " << i;
          return left;
        }
      }
  }
  return left;
}

struct Layouts {
  int tp_from, pp_from, zero_from, tp_to, pp_to, zero_to;
};

TEST(Resharding, EveryRankHoldsWhatItsNewLayoutNeeds) {
  const Scenario scenario = on_gpus(4);
  for (const Layouts& l : {Layouts{1, 1, 0, 2, 1, 0}, Layouts{2, 1, 0, 1, 1, 1}, Layouts{1, 1, 3, 4, 1, 0},
                           Layouts{4, 1, 0, 2, 2, 1}, Layouts{2, 2, 3, 1, 1, 0}, Layouts{1, 4, 0, 2, 1, 2},
                           Layouts{2, 1, 1, 2, 1, 3}}) {
    SCOPED_TRACE(::testing::Message() << "tp" << l.tp_from << " pp" << l.pp_from << " z" << l.zero_from << " -> tp"
                                    << l.tp_to << " pp" << l.pp_to << " z" << l.zero_to);
    EXPECT_EQ(expect_switch_delivers(part_of(scenario, l.tp_from, l.pp_from, l.zero_from),
                                     part_of(scenario, l.tp_to, l.pp_to, l.zero_to), true),
              0);  // a vocabulary padded alike: nothing left
  }
}

// Weights (bf16 on both sides) cut alike by both models when neither layout is ZeRO-3: the same bytes reach each
// GPU as the simulator's switch plan says.
TEST(Resharding, WeightBytesAreTheSimulatorsWithoutZero3) {
  const Scenario scenario = on_gpus(8);
  for (const Layouts& l : {Layouts{1, 1, 0, 2, 1, 0}, Layouts{2, 2, 1, 4, 1, 0}, Layouts{8, 1, 0, 2, 2, 2},
                           Layouts{1, 2, 0, 1, 4, 1}}) {
    const PlanPart from = part_of(scenario, l.tp_from, l.pp_from, l.zero_from);
    const PlanPart to = part_of(scenario, l.tp_to, l.pp_to, l.zero_to);
    const ReshardBytes executed = reshard_bytes(plan_resharding(from, to, scenario.cluster, false), 8);
    const SwitchPlan simulated = plan_switch(scenario.model, scenario.cluster, from.strategy, to.strategy, false);
    EXPECT_EQ(executed.received, simulated.received_bytes) << from.strategy.key() << " -> " << to.strategy.key();
  }
}

// Each layout's gradients arrive at one GPU of each reduction group only: a ZeRO-0 layout's first data-parallel
// GPU, each GPU's shard under ZeRO >= 1.
TEST(Resharding, GradientsStartAtOneGpuOfEachReductionGroup) {
  const Scenario scenario = on_gpus(4);
  const PlanPart from = part_of(scenario, 4, 1, 0), to = part_of(scenario, 1, 1, 0);
  for (const ReshardBlock& b : plan_resharding(from, to, scenario.cluster, true)) {
    if (b.gradient) {
      EXPECT_EQ(b.to_rank, 0);
    }
  }
  const ParameterUnitLayout unit = plan_parameter_units(to, 2, 0).front();
  EXPECT_EQ(gradient_start_range(unit), (std::pair<std::int64_t, std::int64_t>{0, 0}));
  const ParameterUnitLayout first = plan_parameter_units(to, 0, 0).front();
  EXPECT_EQ(gradient_start_range(first), (std::pair<std::int64_t, std::int64_t>{0, first.padded}));
  EXPECT_TRUE(reduction_target(to.strategy, 0));
  EXPECT_FALSE(reduction_target(to.strategy, 2));
}

// A switch runs unit by unit in model order (the embedding, the layers, the output layer), every block once.
TEST(Resharding, BlocksByUnitFollowTheModelAndKeepEveryBlock) {
  const Scenario scenario = on_gpus(4);
  const std::vector<ReshardBlock> blocks =
      plan_resharding(part_of(scenario, 1, 1, 0), part_of(scenario, 2, 2, 1), scenario.cluster, true);
  const auto units = blocks_by_unit(blocks);
  std::vector<std::int32_t> order;
  std::size_t count = 0;
  for (const auto& [unit, list] : units) {
    order.push_back(unit);
    count += list.size();
    for (const ReshardBlock& b : list) EXPECT_EQ(b.unit, unit);
  }
  EXPECT_EQ(order, (std::vector<std::int32_t>{kEmbeddingUnit, 0, 1, 2, 3, kHeadUnit}));
  EXPECT_EQ(count, blocks.size());
}

// A vocabulary padded further under the new TP (1,900 pads to 1,920 at TP 1, to 2,048 at TP 2 and 4): every element
// of the model, and the padding held before, lands where the new layout needs it; the new padding (the table's rows
// and the output layer's columns 1,920 to 2,047) is left to the receiver. Before 2026-11-29 such a switch was refused.
TEST(Resharding, APaddedVocabularyMovesTheModelAndLeavesTheNewPadding) {
  const Scenario scenario = on_gpus(4, 1900);
  const std::vector<Layouts> cases = {Layouts{1, 1, 0, 2, 1, 0}, Layouts{1, 2, 1, 4, 1, 0}, Layouts{1, 1, 3, 2, 2, 1},
                                      Layouts{2, 1, 0, 1, 1, 0}, Layouts{4, 1, 1, 1, 2, 0}};
  for (const Layouts& l : cases) {
    SCOPED_TRACE(::testing::Message() << "tp" << l.tp_from << " pp" << l.pp_from << " z" << l.zero_from << " -> tp"
                                    << l.tp_to << " pp" << l.pp_to << " z" << l.zero_to);
    const std::int64_t left = expect_switch_delivers(part_of(scenario, l.tp_from, l.pp_from, l.zero_from),
                                                     part_of(scenario, l.tp_to, l.pp_to, l.zero_to), true);
    EXPECT_EQ(left > 0, l.tp_to > l.tp_from);  // only a larger TP pads further
    // TP 1 -> TP 2 x DP 2, ZeRO-0: the two GPUs of TP rank 1 hold rows 1,024-2,047 of the table and those columns
    // of the output layer, 128 of each new padding (x hidden 256): 2 x 2 x 128 x 256 weights; the gradients start
    // on the data group's first GPU only: 2 x 128 x 256.
    if (&l == &cases.front()) EXPECT_EQ(left, 6 * 128 * 256);
  }
}

// An element of the model that no GPU held before is refused by name (here the parts are of two vocabularies: the
// second's columns 1,920 to 1,999 are its own, not padding).
TEST(Resharding, RefusesElementsOfTheModelNoGpuHeldBefore) {
  const PlanPart from = part_of(on_gpus(4, 1900), 1, 1, 0);
  const Scenario wider = on_gpus(4, 2000);
  try {
    plan_resharding(from, part_of(wider, 2, 1, 0), wider.cluster, false);
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("held by no GPU"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace twin::exec
