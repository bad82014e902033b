// The published rows that ran DeepSpeed's BF16_Optimizer state it (tools/build_validation_table.py): BLOOM-176B's
// production run (tr11-176B-ml.slurm: --bf16, ZERO_STAGE=0; the 17 runs of 2022-02-28 are transcribed but held back,
// tools/build_validation_table.py), and no other row; the topology search of 2022-02-25
// ran before that optimizer existed (chronicles-prequel.md, 02-28: "from now on the testing is happening with BF16
// optimizer that was just written"). Every BLOOM row states DeepSpeed's partitioned pipeline tensors (the engine's
// is_pipe_partitioned and is_grad_partitioned, both older than BLOOM's runs); MT-NLG's, whose DeepSpeed version is not
// stated, do not.
#include <gtest/gtest.h>

#include "validation/published_table.hpp"

namespace twin {
namespace {

TEST(Bf16OptimizerRows, OnlyBloomsRunsSinceTheOptimizerStateIt) {
  const PublishedTable table = load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json");
  int stating = 0;
  for (const PublishedRow& row : table.rows) {
    const Scenario& s = row.scenario;
    if (!s.framework.deepspeed_bf16_optimizer) continue;
    ++stating;
    EXPECT_TRUE(row.id == "bloom_176b_384gpu" || row.group == "bloom2022-bf16-optimizer-search") << row.id;
    EXPECT_EQ(s.training.precision, "bf16") << row.id;
    EXPECT_FALSE(s.framework.overlap_grad_reduce) << row.id;
    EXPECT_FALSE(s.framework.overlap_param_gather) << row.id;
    EXPECT_EQ(s.search.zero_stage, std::vector<int>{1}) << row.id;  // its own ZeRO-1: optimizer states sharded over DP
  }
  EXPECT_EQ(stating, 1);
  int bloom = 0;
  for (const PublishedRow& row : table.rows) {
    if (row.group == "bloom2022-topology-search") EXPECT_FALSE(row.scenario.framework.deepspeed_bf16_optimizer) << row.id;
    if (row.group.rfind("bloom2022-", 0) == 0) {
      ++bloom;
      EXPECT_TRUE(row.scenario.framework.scatter_gather_tensors_in_pipeline) << row.id;
    }
    if (row.group == "smith2022-mtnlg-530b") EXPECT_FALSE(row.scenario.framework.scatter_gather_tensors_in_pipeline) << row.id;
  }
  EXPECT_EQ(bloom, 22);
}

}  // namespace
}  // namespace twin
