// The per-layer section: absent without a per-layer plan; with one, its stages' runs of layer
// strategies and the comparison with the best uniform strategy, from the plan's fields.
#include <gtest/gtest.h>

#include "reports/per_layer_section.hpp"
#include "strategies/per_layer/per_layer.hpp"

namespace twin {
namespace {

Candidate per_layer_candidate() {
  Candidate c;
  c.feasible = true;
  c.result.iteration_ns = 8'000'000'000;
  const LayerStrategy tp4{{4, false}, 1, Recompute::none};
  const LayerStrategy usp8{{8, true}, 3, Recompute::full};
  auto plan = std::make_shared<PerLayerPlan>();
  plan->stage_micro_batch = 2;
  plan->num_micro_batches = 16;
  plan->stage_layers = {3, 1};
  plan->layers = {tp4, tp4, usp8, usp8};
  c.plan = std::move(plan);
  return c;
}

TEST(PerLayerSection, EmptyWithoutAPerLayerPlan) {
  Candidate uniform;
  uniform.feasible = true;
  EXPECT_EQ(per_layer_section_html({&uniform}, {uniform}), "");
}

TEST(PerLayerSection, ListsRunsPerStageAndComparesWithTheBestUniform) {
  const Candidate plan = per_layer_candidate();
  Candidate uniform;
  uniform.feasible = true;
  uniform.result.iteration_ns = 10'000'000'000;
  const std::string html = per_layer_section_html({&plan, &uniform}, {plan, uniform});
  EXPECT_NE(html.find("<tr><td>0</td><td>0–1</td><td>TP 4 · ZeRO-1 · recompute none</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("<tr><td>0</td><td>2–2</td><td>Ulysses SP 8 · ZeRO-3 · recompute full</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("<tr><td>1</td><td>3–3</td>"), std::string::npos);
  EXPECT_NE(html.find("8.000 s"), std::string::npos);
  EXPECT_NE(html.find("20.0% less time"), std::string::npos);  // 8 s against 10 s
  EXPECT_NE(per_layer_section_html({&plan}, {plan}).find("No uniform strategy"), std::string::npos);
}

}  // namespace
}  // namespace twin
