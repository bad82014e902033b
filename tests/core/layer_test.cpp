// The layer description (core/layer.hpp) is consistent in itself: every tensor a block reads was written
// before it (or is the unit's input), every linear, norm and residual role has exactly one block, and each
// block's saved tensors are the ones Korthikanti et al. 2022 count (34 s b h + 5 a s^2 b with GPT dropout,
// checked in tests/strategies/memory_test.cpp through the memory model that sums them).
#include <gtest/gtest.h>

#include <set>

#include "core/layer.hpp"

namespace twin::layer {
namespace {

void expect_reads_follow_writes(std::span<const Block> blocks, const char* name) {
  std::set<Tensor> written{Tensor::input};
  for (const Block& block : blocks) {
    EXPECT_TRUE(written.count(block.input)) << name << ": " << to_string(block.role) << " reads a tensor not yet written";
    if (block.branch != Tensor::count)
      EXPECT_TRUE(written.count(block.branch)) << name << ": " << to_string(block.role) << " adds an unwritten branch";
    EXPECT_FALSE(written.count(block.output)) << name << ": " << to_string(block.role) << " writes a tensor twice";
    written.insert(block.output);
    if (block.stats != Tensor::count) written.insert(block.stats);
  }
}

TEST(LayerDescription, EveryBlockReadsWhatAnEarlierBlockWrote) {
  expect_reads_follow_writes(layer_blocks(false), "dense layer");
  expect_reads_follow_writes(layer_blocks(true), "MoE layer");
  expect_reads_follow_writes(embedding_blocks(), "embedding");
  expect_reads_follow_writes(head_blocks(), "output layer");
  EXPECT_EQ(layer_blocks(false).back().output, Tensor::output);
  EXPECT_EQ(layer_blocks(true).back().output, Tensor::output);
}

// A saved tensor marked as its block's input is read by no later block of a dense layer (with or without post norms):
// twin execute lets go of it after that block's forward where a recomputed module discards it
// (executor/gpu/dense_block_recompute.cpp), and the memory model no longer counts it. Those are the pre-norms'
// outputs under `layernorm` (QKV's and FC1's input) and FC1's and the activation's outputs under `mlp`.
TEST(LayerDescription, ADiscardedBlockInputHasNoLaterReaderInADenseLayer) {
  for (bool post_norms : {false, true}) {
    const std::span<const Block> blocks = layer_blocks(false, false, post_norms);
    std::set<OpRole> marked;
    for (std::size_t i = 0; i < blocks.size(); ++i)
      for (const SavedTensor& saved : blocks[i].saved) {
        if (!saved.is_block_input) continue;
        EXPECT_FALSE(saved.dropped_by.empty()) << to_string(blocks[i].role);
        marked.insert(blocks[i].role);
        for (std::size_t later = i + 1; later < blocks.size(); ++later)
          EXPECT_TRUE(blocks[later].input != blocks[i].input && blocks[later].branch != blocks[i].input)
              << to_string(blocks[later].role) << " reads " << to_string(blocks[i].role) << "'s discarded input";
      }
    EXPECT_EQ(marked, (std::set<OpRole>{OpRole::qkv_projection, OpRole::fc1, OpRole::activation, OpRole::fc2}));
  }
}

// Post norms (Gemma-2 and 3): each branch normalised before its residual adds it, in every layer variant.
TEST(LayerDescription, PostNormsNormaliseEachBranchBeforeItsResidual) {
  for (bool moe : {false, true})
    for (bool mla : {false, true}) {
      const auto blocks = layer_blocks(moe, mla, true);
      expect_reads_follow_writes(blocks, "post-norm layer");
      EXPECT_EQ(blocks.size(), layer_blocks(moe, mla).size() + 2);
      EXPECT_EQ(blocks.back().output, Tensor::output);
      int post_norms = 0;
      for (std::size_t i = 0; i + 1 < blocks.size(); ++i) {
        if (blocks[i].role != OpRole::post_attention_norm && blocks[i].role != OpRole::post_mlp_norm) continue;
        ++post_norms;
        EXPECT_EQ(blocks[i].kind, BlockKind::norm);
        EXPECT_EQ(blocks[i + 1].kind, BlockKind::residual);
        EXPECT_EQ(blocks[i + 1].branch, blocks[i].output);  // the residual adds the normalised branch
      }
      EXPECT_EQ(post_norms, 2);
    }
  EXPECT_EQ(block_of(OpRole::post_attention_norm).input, Tensor::projection_out);
  EXPECT_EQ(block_of(OpRole::post_mlp_norm).input, Tensor::fc2_out);
}

TEST(LayerDescription, DenseAndMoeLayersDifferOnlyInTheMlp) {
  const auto dense = layer_blocks(false), moe = layer_blocks(true);
  ASSERT_EQ(dense.size(), moe.size() + 2);  // fc1, activation, fc2 become the experts
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(dense[i].role, moe[i].role);
  EXPECT_EQ(moe[6].kind, BlockKind::experts);
  EXPECT_EQ(dense.back().role, moe.back().role);
}

TEST(LayerDescription, EachRoleHasOneBlock) {
  std::set<OpRole> seen;
  for (auto blocks : {layer_blocks(false), embedding_blocks(), head_blocks()})
    for (const Block& block : blocks) EXPECT_TRUE(seen.insert(block.role).second) << to_string(block.role);
  for (OpRole role : {OpRole::qkv_projection, OpRole::attention_projection, OpRole::fc1, OpRole::fc2,
                      OpRole::output_projection, OpRole::input_norm, OpRole::mlp_norm, OpRole::final_norm,
                      OpRole::attention_residual, OpRole::mlp_residual})
    EXPECT_EQ(block_of(role).role, role);
  EXPECT_THROW(block_of(OpRole::grad_reduce), std::logic_error);
}

TEST(LayerDescription, LinearsAreColumnThenRowParallel) {
  // Megatron's pairing: a column-parallel linear opens each TP region, a row-parallel one closes it and
  // its output is the branch a residual adds.
  for (OpRole column : {OpRole::qkv_projection, OpRole::fc1, OpRole::output_projection})
    EXPECT_EQ(block_of(column).kind, BlockKind::column_linear) << to_string(column);
  for (OpRole row : {OpRole::attention_projection, OpRole::fc2}) {
    EXPECT_EQ(block_of(row).kind, BlockKind::row_linear) << to_string(row);
    int residuals = 0;
    for (const Block& block : layer_blocks(false))
      residuals += block.kind == BlockKind::residual && block.branch == block_of(row).output;
    EXPECT_EQ(residuals, 1) << to_string(row);
  }
}

// In an FP8 layer a linear's FP8 copy stands in for its bf16 input only where nothing but its weight gradient reads
// that input: QKV's and FC1's (the norms' outputs) and FC2's (the activation's output); the projection's input is
// attention's output, which attention's backward reads.
TEST(LayerDescription, OnlyInputsKeptForTheWeightGradientAloneGiveWayToFp8Copies) {
  for (OpRole role : {OpRole::qkv_projection, OpRole::fc1, OpRole::fc2})
    EXPECT_TRUE(input_kept_only_for_weight_gradient(block_of(role))) << to_string(role);
  for (OpRole role : {OpRole::attention_projection, OpRole::input_norm, OpRole::core_attention, OpRole::activation,
                      OpRole::attention_residual, OpRole::router})
    EXPECT_FALSE(input_kept_only_for_weight_gradient(block_of(role))) << to_string(role);
}

// Bytes per token a GPT layer (GeLU, ffn = 4h, one query group per head, dropout, no TP) keeps, by the
// description: eq. 1 of Korthikanti et al. 2022 is 34 h + 5 a s with unfused attention.
double gpt_bytes_per_token(double h, double a, double s, bool unfused) {
  double total = 0;
  for (const Block& block : layer_blocks(false))
    for (const SavedTensor& saved : block.saved) {
      const bool kept = saved.kept == KeptWhen::always || saved.kept == KeptWhen::hidden_dropout ||
                        (unfused ? saved.kept == KeptWhen::unrecomputed_unfused ||
                                       saved.kept == KeptWhen::unrecomputed_unfused_dropout
                                 : saved.kept == KeptWhen::unrecomputed_fused);
      if (!kept) continue;
      double width = 0;
      switch (saved.width) {
        case Width::hidden: case Width::value: case Width::query: width = h; break;
        case Width::query_and_key: width = 2 * h; break;
        case Width::qkv: width = 3 * h; break;
        case Width::fc1: case Width::ffn: width = 4 * h; break;
        case Width::attention_scores: width = a * s; break;
        case Width::heads: width = a; break;
        default: ADD_FAILURE() << saved.what << " is not a dense layer's";
      }
      total += saved.bytes_per_element * width;
    }
  return total;
}

TEST(LayerDescription, SavedTensorsAreKorthikantisEquationOne) {
  const double h = 1024, a = 16, s = 2048;
  EXPECT_EQ(gpt_bytes_per_token(h, a, s, true), 34 * h + 5 * a * s);
  // Flash attention keeps fp32 log-sum-exp per head instead of the softmax and its dropout.
  EXPECT_EQ(gpt_bytes_per_token(h, a, s, false), 34 * h + 4 * a);
  EXPECT_EQ(kFullyRecomputedLayer.width, Width::hidden);
  EXPECT_EQ(kFullyRecomputedLayer.bytes_per_element, 2);
}

TEST(LayerDescription, AnEarlyStopRecomputesUpToTheLastTensorTheBackwardKeeps) {
  // Dense: fc2 keeps only its input (the activation's output) and the residual nothing without hidden dropout.
  const std::span<const Block> dense = layer_blocks(false);
  const std::size_t dense_again = blocks_recomputed_by_early_stop(dense, false);
  ASSERT_EQ(dense_again, dense.size() - 2);
  EXPECT_EQ(dense[dense_again - 1].role, OpRole::activation);
  EXPECT_EQ(dense[dense_again].role, OpRole::fc2);
  // With hidden dropout the residual's mask is drawn after fc2: everything runs again.
  EXPECT_EQ(blocks_recomputed_by_early_stop(dense, true), dense.size());
  // MoE: the experts keep their own tensors; only the residual after them is left.
  EXPECT_EQ(blocks_recomputed_by_early_stop(layer_blocks(true), false), layer_blocks(true).size() - 1);
  // Post norms: the MLP's post norm keeps its input, fc2's output, so fc2 runs again; the residual does not.
  const std::span<const Block> post = layer_blocks(false, false, true);
  EXPECT_EQ(blocks_recomputed_by_early_stop(post, false), post.size() - 1);
}

TEST(LayerDescription, EveryTensorHasItsOwnName) {
  std::set<std::string_view> names;
  for (int t = 0; t < kTensorCount; ++t) {
    const std::string_view name = to_string(static_cast<Tensor>(t));
    EXPECT_FALSE(name.empty()) << t;
    EXPECT_NE(name, "none") << t;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
}

}  // namespace
}  // namespace twin::layer
