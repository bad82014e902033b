// The published rows that PyTorch's FSDP1 ran in eager mode state it (framework.name pytorch-fsdp,
// tools/build_validation_table.py PYTORCH_FSDP1): LLM Foundry's MPT rows, Composer wrapping each block in PyTorch's
// FullyShardedDataParallel, and no other; the A100 rows (2023, torch 1.13.1) without the checkpoint's early stop,
// the H100 rows (2024, torch 2.1) with it.
#include <gtest/gtest.h>

#include "validation/published_table.hpp"

namespace twin {
namespace {

TEST(PytorchFsdp1Rows, OnlyLlmFoundrysRowsStateItAndTheA100OnesRecomputeWholeBlocks) {
  const PublishedTable table = load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json");
  int a100 = 0, h100 = 0;
  for (const PublishedRow& row : table.rows) {
    const FrameworkConfig& f = row.scenario.framework;
    const bool llm_foundry = row.group.rfind("llmfoundry-", 0) == 0;
    EXPECT_EQ(f.name == FrameworkName::pytorch_fsdp, llm_foundry) << row.id;
    if (!llm_foundry) continue;
    EXPECT_FALSE(f.compile) << row.id;
    if (row.group == "llmfoundry-mpt-a100-2023") {
      ++a100;
      EXPECT_FALSE(recompute_stops_early(f)) << row.id;
      EXPECT_EQ(gradient_reduce_bytes(f), 2) << row.id;  // Composer's DEFAULT before v0.16.4: FSDP1's param_dtype
    } else {
      ++h100;
      EXPECT_TRUE(recompute_stops_early(f)) << row.id;
      EXPECT_EQ(gradient_reduce_bytes(f), 4) << row.id;
    }
  }
  EXPECT_EQ(a100, 38);
  EXPECT_EQ(h100, 18);
}

}  // namespace
}  // namespace twin
