// The trade-off view: the Pareto front of hand-made candidates (dominated, tied and equal points), and what the
// chart draws for simulated, pruned, out-of-memory and invalid candidates.
#include "reports/tradeoff_chart.hpp"

#include <gtest/gtest.h>

#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

using testing::count;

Candidate simulated(TimeNs iteration_ns, double memory_GiB) {
  Candidate c = testing::best_candidate();
  c.result.iteration_ns = iteration_ns;
  c.memory.per_stage = {testing::memory(0, 0)};
  c.memory.per_stage[0].activations = static_cast<Bytes>(memory_GiB * kGiB);
  c.memory.worst_stage = 0;
  return c;
}

TEST(ParetoFront, KeepsWhatNothingBeatsOnBothTimeAndMemory) {
  // Ranked fastest first. Peak memory adds the fixture's 1.5 GiB of buffers and workspace to the activations.
  const std::vector<Candidate> ranked = {
      simulated(100, 60),  // 0: fastest, heaviest: on the front
      simulated(110, 40),  // 1: on the front
      simulated(120, 50),  // 2: slower and heavier than 1: dominated
      simulated(130, 40),  // 3: as heavy as 1, slower: dominated
      simulated(150, 20),  // 4: lightest: on the front
      simulated(150, 20),  // 5: the same point as 4: on the front with it
  };
  EXPECT_EQ(pareto_front(ranked), (std::vector<std::size_t>{4, 5, 1, 0}));
  std::vector<Candidate> with_infeasible = ranked;
  Candidate light_but_out = simulated(50, 1);
  light_but_out.feasible = false;  // not simulated: never on the front
  with_infeasible.push_back(light_but_out);
  EXPECT_EQ(pareto_front(with_infeasible), pareto_front(ranked));
  EXPECT_TRUE(pareto_front({}).empty());
}

TEST(TradeoffChart, DrawsEachKindOfCandidateAndNamesItsRow) {
  std::vector<Candidate> ranked = {simulated(7000, 30), simulated(9000, 20)};
  Candidate pruned = simulated(0, 25);
  pruned.feasible = false;
  pruned.pruned = true;
  pruned.lower_bound_ns = 8000;  // inside the chart: a ring
  ranked.push_back(pruned);
  pruned.lower_bound_ns = 90000;  // far above: a triangle on the top edge
  ranked.push_back(pruned);
  Candidate out = simulated(0, 200);
  out.feasible = false;
  out.infeasible_reason = "out of memory: 201.5 GiB > 79.6 GiB on stage 0";
  ranked.push_back(out);
  ranked.push_back(testing::ranked_candidates()[3]);  // invalid: no memory estimate, not drawn
  const std::vector<std::size_t> front = pareto_front(ranked);
  ASSERT_EQ(front.size(), 2u);
  const std::string svg = tradeoff_svg(ranked, front, {0, 1, 2, 3, 4, 5}, 79.6);
  EXPECT_NE(svg.find("data-fit"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 2u + 1u + 2u);  // simulated dots, the pruned ring, the front's marks over the dots
  EXPECT_EQ(count(svg, "fill=\"none\" stroke=\"#8a8f98\""), 2u);  // ring and triangle
  EXPECT_EQ(count(svg, "<polygon"), 2u);                          // triangle and out-of-memory diamond
  EXPECT_EQ(count(svg, "1 beyond"), 1u);  // 201.5 GiB is past 1.5 x 79.6
  for (const char* row : {"data-row=\"0\"", "data-row=\"1\"", "data-row=\"2\"", "data-row=\"3\"", "data-row=\"4\""})
    EXPECT_NE(svg.find(row), std::string::npos) << row;
  EXPECT_EQ(svg.find("data-row=\"5\""), std::string::npos);
  EXPECT_NE(svg.find("GPU memory 79.6 GiB"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 1u);  // the front's staircase
  // Nothing simulated: no chart, no section.
  EXPECT_TRUE(tradeoff_svg({out}, {}, {}, 79.6).empty());
  EXPECT_TRUE(tradeoff_section_html({out}, {}, 79.6).empty());
}

TEST(TradeoffSection, ListsTheFrontByPlaceAndCountsEveryKind) {
  const auto ranked = testing::ranked_candidates();  // two simulated, one out of memory, one invalid
  const std::string html = tradeoff_section_html(ranked, {0, 1, 2, 3}, 79.6);
  EXPECT_NE(html.find("simulated (2)"), std::string::npos) << html;
  EXPECT_NE(html.find("out of memory (1)"), std::string::npos);
  EXPECT_NE(html.find("1 invalid candidates have no memory estimate"), std::string::npos);
  // The second (39.5 GiB, 9600 ns) is heavier and slower than the best (37.5 GiB, 7000 ns): off the front.
  EXPECT_NE(html.find("Pareto front (1)"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">1</td><td class=\"key\">" + ranked[0].key()), std::string::npos);
  EXPECT_EQ(html.find("<td class=\"key\">" + ranked[1].key()), std::string::npos);
}

}  // namespace
}  // namespace twin
