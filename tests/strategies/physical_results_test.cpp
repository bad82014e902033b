// Every figure of a result is physically possible, whatever a scenario overrides of its GPUs and links: MFU and
// HFU at most 100% (no kernel price beats the GPU's stated bf16 peak, cost/kernel_cost.cpp), times and
// throughputs positive and finite. Issue 44: a preset whose peak_bf16_tflops was lowered kept its profile's
// measured times and reached 107% to 60,400% MFU.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "strategies/families/families.hpp"
#include "strategies/search.hpp"
#include "tests/strategies/shipped_scenarios.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

struct Override {
  std::string name;
  std::function<void(NodeGroup&)> apply;
};

// What a scenario may override of a GPU preset and its node's links, to extremes in both directions.
const std::vector<Override>& overrides() {
  static const std::vector<Override> all = {
      {"peak_bf16_tflops 1", [](NodeGroup& g) { g.gpu.peak_bf16_tflops = 1; }},
      {"peak_bf16_tflops / 3", [](NodeGroup& g) { g.gpu.peak_bf16_tflops /= 3; }},
      {"peak_bf16_tflops x 3", [](NodeGroup& g) { g.gpu.peak_bf16_tflops *= 3; }},
      {"hbm_bandwidth_GBps 10", [](NodeGroup& g) { g.gpu.hbm_bandwidth_GBps = 10; }},
      {"hbm_bandwidth_GBps x 10", [](NodeGroup& g) { g.gpu.hbm_bandwidth_GBps *= 10; }},
      {"memory_GiB x 4", [](NodeGroup& g) { g.gpu.memory_GiB *= 4; }},
      {"intra_node 1 GB/s", [](NodeGroup& g) { g.intra_node.bandwidth_GBps = 1; }},
      {"intra_node x 100", [](NodeGroup& g) { g.intra_node.bandwidth_GBps *= 100; }},
      {"nics 1 Gb/s", [](NodeGroup& g) { g.nics.bandwidth_Gbps = std::min(g.nics.bandwidth_Gbps, 1.0); }},
      {"nics x 100", [](NodeGroup& g) { g.nics.bandwidth_Gbps *= 100; }},
  };
  return all;
}

void expect_physically_possible(const Candidate& c) {
  if (!c.feasible) return;  // infeasible and pruned rows carry no figures
  const Throughput& t = c.throughput;
  EXPECT_TRUE(std::isfinite(t.iteration_s) && t.iteration_s > 0) << c.key() << ": iteration " << t.iteration_s;
  EXPECT_TRUE(std::isfinite(t.tokens_per_s) && t.tokens_per_s > 0) << c.key() << ": tokens/s " << t.tokens_per_s;
  EXPECT_TRUE(t.mfu > 0 && t.mfu <= 1) << c.key() << ": MFU " << t.mfu;
  EXPECT_TRUE(t.hfu >= t.mfu && t.hfu <= 1) << c.key() << ": HFU " << t.hfu;
  EXPECT_GT(c.result.iteration_ns, 0) << c.key();
}

Scenario overridden(Scenario scenario, const Override& o) {
  for (NodeGroup& group : scenario.cluster.node_groups) o.apply(group);
  return scenario;
}

// Uniform candidates spread over every shipped scenario's enumeration, simulated under each override.
TEST(PhysicalResults, SpreadCandidatesOfEveryShippedScenarioUnderEveryOverride) {
  int checked = 0;
  for (const fs::path& file : testing::shipped_scenario_files()) {
    SCOPED_TRACE(file.filename().string());
    const Scenario shipped = load_scenario(file.string());
    for (const Override& o : overrides()) {
      SCOPED_TRACE(o.name);
      const Scenario scenario = overridden(shipped, o);
      const Profile profile = testing::profile_of(scenario, file);
      for (const Strategy& strategy : testing::spread_candidates(scenario, 2)) {
        expect_physically_possible(evaluate(scenario, profile, strategy, false));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 200);
}

// Whole searches, every family's rows included, on the shipped scenarios small enough to search often.
TEST(PhysicalResults, EveryRankingRowOfTheFamilyScenariosUnderEveryOverride) {
  int rows = 0;
  for (const char* name : {"llama2-7b-4xH100-per-layer-fixed-plan", "mixed-h100-a100-fixed-plan",
                           "llama2-7b-4layers-4xH100-asymmetric", "accuracy-llama2-7b-1xH100"}) {
    SCOPED_TRACE(name);
    const fs::path file = fs::path(TWIN_SOURCE_DIR) / "scenarios" / (std::string(name) + ".json");
    const Scenario shipped = load_scenario(file.string());
    for (const Override& o : overrides()) {
      SCOPED_TRACE(o.name);
      const Scenario scenario = overridden(shipped, o);
      SearchOptions options;
      options.jobs = 2;
      for (const Candidate& c : search(scenario, testing::profile_of(scenario, file), plan_families(), options)) {
        expect_physically_possible(c);
        rows += c.feasible;
      }
    }
  }
  EXPECT_GT(rows, 20);
}

}  // namespace
}  // namespace twin
