// The heterogeneous report section: present with the plan's stages and the uniform comparison when an
// asymmetric plan is ranked, absent otherwise.
#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "reports/heterogeneous_section.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"

namespace twin {
namespace {

TEST(HeterogeneousSection, ShowsStagesAndTheUniformComparison) {
  const Scenario sc = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/mixed-h100-a100-fixed-plan.json");
  std::vector<Candidate> ranked;
  ranked.push_back(evaluate_asymmetric_plan(sc, builtin_profile(), *sc.strategy, sc.pipelines, false));
  ASSERT_TRUE(ranked[0].feasible);
  Candidate uniform;
  uniform.feasible = true;
  uniform.result.iteration_ns = 2 * ranked[0].result.iteration_ns;
  uniform.throughput.tokens_per_s = ranked[0].throughput.tokens_per_s / 2;
  ranked.push_back(uniform);
  const std::string html = heterogeneous_section_html(ranked);
  EXPECT_NE(html.find("<section id=\"heterogeneous\">"), std::string::npos);
  EXPECT_NE(html.find("2.00x its throughput"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>A100-SXM-40GB</td><td>8–15</td><td>8</td><td>14</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>1 x 22</td>"), std::string::npos);
  EXPECT_EQ(heterogeneous_section_html({uniform}), "");
}

}  // namespace
}  // namespace twin
