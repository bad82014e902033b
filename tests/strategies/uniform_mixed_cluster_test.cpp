// Uniform strategies on a mixed cluster: a class whose ranks span GPU kinds is priced as its slowest kind
// and its memory is checked against the smallest GPU among its ranks.
#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

Scenario load(const char* name) { return load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/" + name); }

TEST(HeterogeneousUniform, MixedClassesRunAtTheSlowestKindAndFitItsMemory) {
  const Scenario sc = load("mixed-h100-a100-llama2-13b.json");
  Strategy st;
  st.tensor_model_parallel_size = 8;
  st.micro_batch_size = 1;
  st.sequence_parallel = true;
  ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
  ASSERT_EQ(invalid_reason(sc, st), std::nullopt);
  const IterationGraph graph = lower_to_op_graphs(sc, st);
  ASSERT_EQ(graph.classes.size(), 1u);
  EXPECT_EQ(graph.classes[0].node_group, 1);  // dp 2 spans both nodes: priced as the A100s
  MemoryEstimate memory;
  memory.per_stage.push_back(MemoryBreakdown{});
  memory.per_stage[0].parameters = static_cast<Bytes>(60.0 * kGiB);  // fits an H100, not an A100-40GB
  EXPECT_EQ(uniform_out_of_memory_reason(sc, st, memory), "out of memory: 60.0 GiB > 40.0 GiB on stage 0");
}

}  // namespace
}  // namespace twin
