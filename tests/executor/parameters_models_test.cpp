// One model, one count, for every model twin ships: each shipped scenario's model and each Hugging Face fixture's
// is either laid out by the executor with exactly the weights the memory model counts (plan_parameter_units
// throws std::logic_error where they differ), or refused as a model the executor does not run
// (std::invalid_argument, which the plan check names at /scenario/model). Qwen3's QK-norm weights were neither, until
// they were laid out (2026-11-29).
#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/hf_config.hpp"
#include "executor/parameters.hpp"
#include "strategies/search.hpp"
#include "strategies/validity.hpp"
#include "tests/core/hf_fixtures.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

const std::filesystem::path kScenarios = std::filesystem::path(TWIN_SOURCE_DIR) / "scenarios";

// "" when every stage of `strategy` lays out the counted weights, else the refusal; a count that differs fails.
std::string layout_refusal(const Scenario& scenario, const Strategy& strategy, const std::string& what) {
  try {
    const int stages = strategy.pipeline_model_parallel_size;
    for (int stage = 0; stage < stages; ++stage)
      plan_parameter_units(scenario, strategy,
                           placement_of(strategy, static_cast<int>(stage * strategy.world_size() / stages)), 0);
    return "";
  } catch (const std::invalid_argument& refused) {
    return refused.what();
  } catch (const std::logic_error& mismatch) {
    ADD_FAILURE() << what << " (" << strategy.key() << "): " << mismatch.what();
    return mismatch.what();
  }
}

// The first few strategies of the scenario's search that are valid (fitting memory or not).
std::vector<Strategy> some_strategies(const Scenario& scenario) {
  std::vector<Strategy> out;
  for (const Candidate& c : enumerate_candidates(scenario)) {
    if (!c.feasible && c.infeasible_reason.rfind("out of memory", 0) != 0) continue;
    out.push_back(c.strategy);
    if (out.size() == 3) break;
  }
  return out;
}

TEST(ParametersModels, EveryShippedScenarioHoldsTheCountedWeightsOrIsRefused) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kScenarios)) {
    if (entry.path().extension() != ".json") continue;
    const Scenario scenario = load_scenario(entry.path());
    for (const Strategy& strategy : some_strategies(scenario)) {
      layout_refusal(scenario, strategy, entry.path().filename().string());
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

// Each fixture at TP 1 and 2, where the search's rules (strategies/validity.hpp, which the plan check applies to a
// pinned strategy before any layout) allow it: Gemma-3-1B's one key-value group at TP 2 is not laid out but refused
// by them, as the search and the plan check refuse it.
TEST(ParametersModels, EveryHuggingFaceFixtureHoldsTheCountedWeightsOrIsRefused) {
  int laid_out = 0;
  std::vector<std::string> invalid;
  for (const auto& entry : std::filesystem::directory_iterator(testing::kHfFixtures)) {
    const std::string file = entry.path().filename().string();
    ModelConfig model;
    try {
      model = model_from_hf_config(testing::hf_fixture(file), file);
    } catch (const InputError&) {
      continue;  // a config twin refuses to plan (DeepSeek-V3's multi-token prediction): nothing to lay out
    }
    const Scenario scenario = testing::make_scenario(model, 1, 1024, 8);
    for (const int tp : {1, 2}) {
      Strategy strategy = testing::make_strategy(tp, 1);
      if (complete_strategy(scenario, strategy)) continue;
      if (const auto reason = invalid_reason(scenario, strategy)) {
        invalid.push_back(file + " tp " + std::to_string(tp) + ": " + *reason);
        continue;
      }
      laid_out += layout_refusal(scenario, strategy, file).empty() ? 1 : 0;
    }
  }
  EXPECT_GT(laid_out, 4);  // the Llama, Mistral and Mixtral fixtures at least
  EXPECT_NE(std::find(invalid.begin(), invalid.end(),
                      "gemma-3-1b-config.json tp 2: num_query_groups 1 not divisible by tensor_model_parallel_size 2"),
            invalid.end());
}

// Qwen3-MoE lays out its q_norm and k_norm (kv_channels each), counted as the memory model counts them, at TP 1 and
// (since 2026-11-30: their gradients are summed over TP) at TP 2; a DeepSeek-V3-shaped model's shared experts are
// refused under TP, while its first dense layer and routed experts lay out at TP 2.
TEST(ParametersModels, QkNormLaysOutUnderTpSharedExpertsAtTpOne) {
  const Scenario qwen = load_scenario(kScenarios / "qwen3-30b-a3b-16xH100.json");
  const Scenario deepseek = load_scenario(kScenarios / "exec-deepseek-v3-nomla-small-1xH200.json");
  ModelConfig deepseek_unshared = deepseek.model;
  deepseek_unshared.moe.shared_expert_ffn_hidden_size = 0;
  for (const auto& [model, refusal] : {std::pair{qwen.model, ""}, std::pair{deepseek.model, "shared experts"},
                                       std::pair{deepseek_unshared, ""}}) {
    const Scenario scenario = testing::make_scenario(model, 1, 1024, 8);
    for (const int tp : {1, 2}) {
      Strategy strategy = testing::make_strategy(tp, 1);
      ASSERT_FALSE(complete_strategy(scenario, strategy).has_value()) << model.name << " tp " << tp;
      const std::string refused = layout_refusal(scenario, strategy, model.name);
      if (tp == 1 || std::string(refusal).empty())
        EXPECT_EQ(refused, "") << model.name << " tp " << tp;
      else
        EXPECT_NE(refused.find(refusal), std::string::npos) << model.name << ": " << refused;
    }
  }
}

// gpt-oss's attention sinks: each layer holds one logit per query head, sharded over TP as the heads are (each TP
// rank its heads' sinks), and the layout counts them as the memory model does (plan_parameter_units checks).
TEST(ParametersModels, SinksAreOnePerHeadShardedAsTheHeads) {
  ModelConfig model = *model_preset("llama2-7b");
  model.attention_sinks = true;
  const Scenario scenario = testing::make_scenario(model, 1, 1024, 8);
  for (const int tp : {1, 2, 4}) {
    Strategy strategy = testing::make_strategy(tp, 1);
    ASSERT_FALSE(complete_strategy(scenario, strategy).has_value()) << "tp " << tp;
    ASSERT_EQ(layout_refusal(scenario, strategy, "sinks"), "") << "tp " << tp;
    for (int rank = 0; rank < tp; ++rank) {
      const auto units = plan_parameter_units(scenario, strategy, placement_of(strategy, rank), 0);
      int sinks = 0;
      for (const ParameterUnitLayout& unit : units)
        for (const WeightTensor& w : unit.tensors) {
          if (w.part != WeightPart::sinks) continue;
          ++sinks;
          EXPECT_EQ(w.rows * w.cols, model.num_attention_heads / tp) << w.name;
          EXPECT_EQ(w.role, OpRole::core_attention) << w.name;
        }
      EXPECT_EQ(sinks, model.num_layers) << "tp " << tp << " rank " << rank;
    }
  }
}

}  // namespace
}  // namespace twin::exec
