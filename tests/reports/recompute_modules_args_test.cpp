// Selective recompute's modules through the megatron bridge both ways: megatron_args.txt writes
// --recompute-modules in the scenario's order, and the command line reads back into the same strategy; the flag
// without --recompute-granularity selective is listed as ignored, as TransformerConfig ignores it.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "core/megatron_command_line.hpp"
#include "core/megatron_scenario.hpp"
#include "core/scenario.hpp"
#include "reports/megatron_args.hpp"
#include "strategies/search.hpp"

namespace twin {
namespace {

Scenario moe_scenario() {
  return parse_scenario_text(R"({
    "model": { "preset": "llama2-7b", "num_layers": 4,
               "moe": { "num_experts": 8, "top_k": 2, "ffn_hidden_size": 1024, "first_dense_layers": 1 } },
    "training": { "seq_length": 4096, "global_batch_size": 8, "precision": "bf16" },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8 } ] },
    "strategy": { "tensor_model_parallel_size": 2, "sequence_parallel": true, "recompute": "selective",
                  "recompute_modules": ["moe_act", "layernorm", "mlp"] }
  })",
                             "s.json");
}

Strategy pinned(const Scenario& scenario) {
  const std::vector<Candidate> candidates = enumerate_candidates(scenario);
  EXPECT_EQ(candidates.size(), 1u);
  return candidates.front().strategy;
}

TEST(RecomputeModulesArgs, WrittenAndReadBack) {
  const Scenario scenario = moe_scenario();
  const std::string text = megatron_args(scenario, pinned(scenario));
  EXPECT_NE(text.find("--recompute-granularity selective\n--recompute-modules moe_act layernorm mlp\n"),
            std::string::npos)
      << text;
  const MegatronScenario read =
      scenario_from_megatron_command_line(scenario, parse_megatron_command_line(text, "args.txt"), "args.txt");
  ASSERT_TRUE(read.scenario.strategy);
  EXPECT_EQ(read.scenario.strategy->recompute_modules, scenario.strategy->recompute_modules);
  EXPECT_EQ(megatron_args(read.scenario, pinned(read.scenario)), text);
}

TEST(RecomputeModulesArgs, IgnoredWithoutSelectiveGranularity) {
  const Scenario scenario = moe_scenario();
  std::string text = megatron_args(scenario, pinned(scenario));
  const std::string granularity = "--recompute-granularity selective\n";
  text.replace(text.find(granularity), granularity.size(), "");
  const MegatronScenario read =
      scenario_from_megatron_command_line(scenario, parse_megatron_command_line(text, "args.txt"), "args.txt");
  EXPECT_TRUE(read.scenario.strategy->recompute_modules.empty());
  EXPECT_TRUE(std::ranges::any_of(read.not_modelled, [](const std::string& line) {
    return line.find("--recompute-modules moe_act layernorm mlp: ignored without") != std::string::npos;
  })) << text;
}

}  // namespace
}  // namespace twin
