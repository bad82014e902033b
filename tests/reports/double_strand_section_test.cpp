// The report's double-strand section: absent without a double-strand candidate in the top; otherwise the
// exposed communication against the same strategy with 1F1B, and the paired segments, from the numbers.
#include <gtest/gtest.h>

#include "reports/double_strand_section.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

Candidate simulated(const Strategy& strategy, TimeNs iteration_ns, TimeNs exposed_ns) {
  Candidate c;
  c.strategy = strategy;
  c.feasible = true;
  c.result.iteration_ns = iteration_ns;
  c.result.breakdown.compute_ns = iteration_ns - exposed_ns;
  c.result.breakdown.exposed_communication_ns = exposed_ns;
  return c;
}

TEST(DoubleStrandSection, AbsentWithoutADoubleStrandCandidate) {
  const std::vector<Candidate> ranked = {simulated(testing::strategy(4, 1, 2, 1, Schedule::one_f_one_b), 5e9, 1e9)};
  EXPECT_EQ(double_strand_section_html({&ranked[0]}, ranked), "");
}

TEST(DoubleStrandSection, StatesHiddenCommunicationAndPairedSegments) {
  Candidate ds = simulated(testing::strategy(4, 1, 2, 1, Schedule::double_strand), 4'250'000'000, 250'000'000);
  StrandPairingSummary layer;
  layer.forward_unit = layer.backward_unit = "layer";
  layer.blocks = {"tp_gather.fwd ‖ fc2.bwd", "input_norm.fwd ‖ –"};
  layer.paired_blocks = 1;
  layer.serial_ns = 8'000'000;
  layer.paired_ns = 6'500'000;
  StrandPairingSummary ends;
  ends.forward_unit = "embedding";
  ends.backward_unit = "output layer";
  ends.blocks = {"embedding.fwd ‖ loss.bwd"};
  ds.strand_pairings = {ends, layer};
  const std::vector<Candidate> ranked = {ds, simulated(testing::strategy(4, 1, 2, 1, Schedule::one_f_one_b), 4'875'000'000, 850'000'000)};
  const std::string html = double_strand_section_html({&ranked[0], &ranked[1]}, ranked);
  EXPECT_NE(html.find("(place 1)"), std::string::npos) << html;
  EXPECT_NE(html.find("Exposed communication: 0.250 s; iteration 4.250 s."), std::string::npos) << html;
  EXPECT_NE(html.find("The same strategy with 1F1B exposes 0.850 s and takes 4.875 s: double strand hides 0.600 s of "
                      "communication and the iteration is 0.625 s shorter."),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("1 of 2 blocks co-run; estimated 8.000 ms alone, 6.500 ms paired"), std::string::npos) << html;
  EXPECT_NE(html.find("<li><code>tp_gather.fwd ‖ fc2.bwd</code></li>"), std::string::npos) << html;
  EXPECT_EQ(html.find("input_norm.fwd"), std::string::npos) << "blocks that run alone are not listed";
  EXPECT_EQ(html.find("embedding.fwd"), std::string::npos) << "only layer pairs are listed";
}

TEST(DoubleStrandSection, SaysWhen1F1BWasNotSimulated) {
  const std::vector<Candidate> ranked = {simulated(testing::strategy(4, 1, 2, 1, Schedule::double_strand), 4e9, 2e8)};
  const std::string html = double_strand_section_html({&ranked[0]}, ranked);
  EXPECT_NE(html.find("was not simulated"), std::string::npos) << html;
}

}  // namespace
}  // namespace twin
