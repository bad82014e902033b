// The switch between two layouts, run on the CPU: every rank's buffers of the layout before filled with each
// element's identity in the full weight, the plan's blocks copied, and every rank's buffers after compared with
// the identities they must hold (weights where the rank holds them, gradients at the reduction's target only).
// The bytes that cross between GPUs are the simulator's switch plan's, where both cut the weights alike.
#include "executor/resharding.hpp"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

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
std::int64_t identity(const std::string& name, std::int64_t row, std::int64_t col) {
  return static_cast<std::int64_t>(std::hash<std::string>{}(name) % 1000) * 1'000'000'000'000 + row * 100'000 + col;
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

// Runs the switch on the CPU and checks every rank's weights (and gradients) after it.
void expect_switch_delivers(const PlanPart& from, const PlanPart& to, bool gradients) {
  const int world = to.strategy.world_size();
  const std::vector<ReshardBlock> blocks = plan_resharding(from, to, to.scenario.cluster, gradients);
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
    for (const ReshardBlock& b : blocks) {
      if (b.gradient != gradient) continue;
      const std::vector<std::int64_t>& source = before.at(b.from_rank).at(b.unit);
      std::vector<std::int64_t>& target = after.at(b.to_rank).at(b.unit);
      for (std::int64_t r = 0; r < b.rows; ++r)
        for (std::int64_t c = 0; c < b.cols; ++c) {
          const std::int64_t value = source.at(static_cast<std::size_t>(b.from_first + r * b.from_ld + c));
          ASSERT_NE(value, kNone) << "rank " << b.from_rank << " sends an element it does not hold";
          std::int64_t& slot = target.at(static_cast<std::size_t>(b.to_first + r * b.to_ld + c));
          ASSERT_EQ(slot, kNone) << "rank " << b.to_rank << " receives an element twice";
          slot = value;
        }
    }
    for (int rank = 0; rank < world; ++rank)
      for (const auto& [unit, buffer] : expected[rank]) {
        const std::vector<std::int64_t>& got = after[rank].at(unit);
        for (std::size_t i = 0; i < buffer.size(); ++i)
          ASSERT_EQ(got[i], buffer[i]) << (gradient ? "gradients" : "weights") << ", rank " << rank << ", unit "
                                       << unit << ", element " << i;
      }
  }
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
    expect_switch_delivers(part_of(scenario, l.tp_from, l.pp_from, l.zero_from),
                           part_of(scenario, l.tp_to, l.pp_to, l.zero_to), true);
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

// A vocabulary padded to another size under the new TP holds rows no GPU held before: refused by name.
TEST(Resharding, RefusesElementsNoGpuHeldBefore) {
  const Scenario scenario = on_gpus(4, 1900);  // padded to 1,920 at TP 1, 2,048 at TP 2
  try {
    plan_resharding(part_of(scenario, 1, 1, 0), part_of(scenario, 2, 1, 0), scenario.cluster, false);
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("held by no GPU"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace twin::exec
