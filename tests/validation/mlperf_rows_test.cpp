// MLPerf Training's rows of the FP8/Blackwell table state the recipe their submissions ran (docs/VALIDATION.md
// "MLPerf Training's H100 and H200 rows"): GPT-3 175B as MLPerf defines it under TP 4 and PP 8 with FP8 hybrid delayed
// scaling over an amax history of 1,024; Llama 3.1 405B with the embedding and the loss in the pipeline split, FP8
// E4M3 delayed scaling over a history of 1 and FP8 parameters; every row an iteration time its log prints.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "validation/published_table.hpp"

namespace twin {
namespace {

const PublishedTable& fp8_table() {
  static const PublishedTable table =
      load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/fp8_blackwell.json");
  return table;
}

bool is_mlperf(const PublishedRow& row) { return row.group.rfind("mlperf-training-", 0) == 0; }

// The MLPerf rows of one benchmark (its name in the row ids: gpt3_175b, llama31_405b).
std::vector<const PublishedRow*> mlperf_rows_of(const std::string& benchmark) {
  std::vector<const PublishedRow*> rows;
  for (const PublishedRow& row : fp8_table().rows)
    if (is_mlperf(row) && row.id.find(benchmark) != std::string::npos) rows.push_back(&row);
  return rows;
}

TEST(MlperfRows, EveryRowIsAPrintedStepTimeOfARoundGroupOfOneGpuKind) {
  std::set<std::string> groups;
  int rows = 0;
  for (const PublishedRow& row : fp8_table().rows) {
    if (!is_mlperf(row)) continue;
    ++rows;
    groups.insert(row.group);
    EXPECT_EQ(row.published.metric, "iteration_time_s") << row.id;
    EXPECT_NE(row.url.find("github.com/mlcommons/training_results_v"), std::string::npos) << row.id;
    ASSERT_TRUE(row.scenario.training.fp8.has_value()) << row.id;
    const std::string gpu = row.scenario.cluster.node_groups.front().gpu.name;
    const bool h200 = row.group.find("-h200-") != std::string::npos;
    EXPECT_EQ(gpu, h200 ? "H200-141GB" : "H100-SXM-80GB") << row.id;
  }
  EXPECT_EQ(rows, 28);
  EXPECT_EQ(groups.size(), 8u);
}

TEST(MlperfRows, Gpt3RowsRunMlperfsModelUnderTp4Pp8WithDelayedScalingOverAHistoryOf1024) {
  const std::vector<const PublishedRow*> rows = mlperf_rows_of("gpt3_175b");
  for (const PublishedRow* r : rows) {
    const PublishedRow& row = *r;
    const Scenario& s = row.scenario;
    EXPECT_EQ(s.model.num_layers, 96) << row.id;
    EXPECT_EQ(s.model.hidden_size, 12288) << row.id;
    EXPECT_EQ(s.model.hidden_dropout, 0.0) << row.id;
    EXPECT_FALSE(s.model.untie_embeddings_and_output_weights) << row.id;
    ASSERT_TRUE(s.strategy.has_value()) << row.id;
    EXPECT_EQ(s.strategy->tensor_model_parallel_size, 4) << row.id;
    EXPECT_EQ(s.strategy->pipeline_model_parallel_size, 8) << row.id;
    EXPECT_TRUE(s.strategy->sequence_parallel) << row.id;
    EXPECT_EQ(s.training.fp8->recipe, Fp8Recipe::delayed) << row.id;
    EXPECT_EQ(s.training.fp8->format, Fp8Format::hybrid) << row.id;
    EXPECT_EQ(s.training.fp8->amax_history_len, 1024) << row.id;
    EXPECT_TRUE(s.framework.tp_comm_overlap) << row.id;
  }
  EXPECT_EQ(rows.size(), 18u);
}

TEST(MlperfRows, Llama405bRowsPutTheEmbeddingAndTheLossInThePipelineSplit) {
  const std::vector<const PublishedRow*> rows = mlperf_rows_of("llama31_405b");
  for (const PublishedRow* r : rows) {
    const PublishedRow& row = *r;
    const Scenario& s = row.scenario;
    ASSERT_TRUE(s.strategy.has_value()) << row.id;
    const PipelineLayout& layout = s.strategy->pipeline_model_parallel_layout;
    EXPECT_EQ(layout.text, "Et|(tt|)*62tL") << row.id;
    EXPECT_EQ(layout.virtual_stages(),
              s.strategy->pipeline_model_parallel_size * s.strategy->virtual_pipeline_model_parallel_size)
        << row.id;
    EXPECT_EQ(s.strategy->context_parallel_size, 2) << row.id;
    EXPECT_EQ(s.model.vocab_size, 32256) << row.id;  // MLPerf's Mixtral 8x22B tokenizer, padded
    EXPECT_EQ(s.training.fp8->format, Fp8Format::e4m3) << row.id;
    EXPECT_EQ(s.training.fp8->amax_history_len, 1) << row.id;
    EXPECT_TRUE(s.training.fp8->param_gather) << row.id;
    EXPECT_TRUE(s.framework.defer_embedding_wgrad_compute) << row.id;
    EXPECT_EQ(s.framework.wgrad_deferral_limit, 50) << row.id;
  }
  EXPECT_EQ(rows.size(), 7u);  // Eos's five H100 rows, Nebius's two H200 rows
}

}  // namespace
}  // namespace twin
