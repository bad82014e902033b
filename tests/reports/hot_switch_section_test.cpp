// The hot-switching section: absent without a multi-phase plan; with one, its phases, switch bytes and the
// comparison with the best static-packed candidate, worked out by hand.
#include <gtest/gtest.h>

#include "reports/hot_switch_section.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"

namespace twin {
namespace {

Candidate hot_switch_candidate(int phases, TimeNs iteration_ns) {
  Candidate c;
  c.feasible = true;
  c.strategy.tensor_model_parallel_size = 4;
  c.result.iteration_ns = iteration_ns;
  auto plan = std::make_shared<HotSwitchPlan>();
  for (int p = 0; p < phases; ++p) {
    HotSwitchPhase phase;
    phase.workload.min_exclusive = p * 4096;
    phase.workload.max_length = (p + 1) * 4096;
    phase.workload.sequences = 100 - p;
    phase.packs = 40 + p;
    plan->phases.push_back(phase);
    if (phases > 1) {
      SwitchPlan in;
      in.intra_node_bytes = 1'500'000'000;
      in.received_bytes = {100'000'000, 250'000'000};
      plan->switches.push_back(in);
    }
  }
  c.plan = std::move(plan);
  return c;
}

TEST(HotSwitchSection, EmptyWithoutAMultiPhasePlan) {
  EXPECT_EQ(hot_switch_section_html({}), "");
  EXPECT_EQ(hot_switch_section_html({hot_switch_candidate(1, 1000)}), "");
}

TEST(HotSwitchSection, ShowsPhasesSwitchBytesAndTheWinOverTheBestStatic) {
  std::vector<Candidate> ranked = {hot_switch_candidate(2, 8'000'000'000),
                                   hot_switch_candidate(1, 10'000'000'000),
                                   hot_switch_candidate(1, 12'000'000'000)};
  const std::string html = hot_switch_section_html(ranked);
  EXPECT_NE(html.find("2 phases (place 1)"), std::string::npos) << html;
  EXPECT_NE(html.find("(0, 4096]"), std::string::npos);
  EXPECT_NE(html.find("(4096, 8192]"), std::string::npos);
  EXPECT_NE(html.find("2 (home)"), std::string::npos);
  EXPECT_NE(html.find("1.50 GB / 0.00 GB (weights)"), std::string::npos);
  EXPECT_NE(html.find("(weights + gradients)"), std::string::npos);
  EXPECT_NE(html.find("0.25 GB"), std::string::npos);
  // 10 s / 8 s = 1.25: 25.0% faster than the fastest static candidate (not the 12 s one).
  EXPECT_NE(html.find("25.0% faster (1.250x)"), std::string::npos) << html;
}

TEST(HotSwitchSection, SaysSoWhenHotSwitchingLoses) {
  std::vector<Candidate> ranked = {hot_switch_candidate(1, 8'000'000'000),
                                   hot_switch_candidate(3, 10'000'000'000)};
  const std::string html = hot_switch_section_html(ranked);
  EXPECT_NE(html.find("3 phases (place 2)"), std::string::npos);
  EXPECT_NE(html.find("25.0% slower (0.800x)"), std::string::npos) << html;
}

}  // namespace
}  // namespace twin
