// The executor's training data: every split of the batch sees the same sequences, the rule the loss can learn,
// packed rows, a context-parallel rank's load-balanced chunks, and a per-layer plan's blocks.
#include <gtest/gtest.h>

#include "executor/token_stream.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/per_layer/per_layer_edges.hpp"
#include "tests/executor/ulysses_edge_fixture.hpp"

namespace twin::exec {
namespace {

TEST(TokenStream, SplitsOfTheBatchSeeTheSameSequences) {
  const TokenStream stream{32000, 64, 5};
  const auto whole = rank_iteration_tokens(stream, 2, 8, 1, 0, 2, 4);
  const auto first = rank_iteration_tokens(stream, 2, 8, 2, 0, 1, 4);
  const auto second = rank_iteration_tokens(stream, 2, 8, 2, 1, 2, 2);
  // Single GPU, micro-batch 0 holds sequences 16 and 17: inputs then targets, 64 tokens each.
  const auto sequence = stream.sequence(2 * 8 + 1);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(whole[64 + i], sequence[i]);
    EXPECT_EQ(whole[2 * 64 + 64 + i], sequence[i + 1]);
    EXPECT_EQ(first[2 * 64 + i], sequence[i]);  // DP rank 0, micro-batch 1 of 1 sequence
  }
  // DP rank 1 of 2 starts at sequence 4 of the iteration.
  const auto fifth = stream.sequence(2 * 8 + 4);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(second[i], fifth[i]);
}

// A per-layer stage's share (strategies/families/rank_plan.hpp): micro-batch m is the batch's sequences
// [m B, (m + 1) B), of which the GPU reads the inputs of one run and the targets of another.
TokenShare stage_share(int stage_micro_batch, int micro_batches, SequenceRun inputs, SequenceRun targets) {
  TokenShare share;
  share.step_sequences = static_cast<std::int64_t>(stage_micro_batch) * micro_batches;
  share.micro_batch_stride = stage_micro_batch;
  share.micro_batches = micro_batches;
  share.inputs = inputs;
  share.targets = targets;
  return share;
}

// A per-layer plan: whichever layout the embedding's block has, GPU g's run of its rows (the g % group-th of
// `group` equal runs) is the same tokens, rows [g T, (g + 1) T) of the stage's micro-batch; so are the targets.
TEST(TokenStream, PerLayerBlocksCutTheSameRowsForEveryGpuWhateverTheLayout) {
  const TokenStream stream{32000, 64, 9};
  const int gpus = 4, stage_micro_batch = 8, micro_batches = 3;
  const std::int64_t per_gpu = stage_micro_batch * 64 / gpus;
  for (int gpu = 0; gpu < gpus; ++gpu) {
    std::vector<std::int32_t> expected;  // the one-GPU-per-block layout's inputs and targets
    for (int group : {1, 2, 4}) {
      const BlockSamples block = block_samples({group, false}, gpus, stage_micro_batch, gpu);
      const SequenceRun run{block.first, block.count};
      const auto tokens = share_tokens(stream, 5, stage_share(stage_micro_batch, micro_batches, run, run));
      ASSERT_EQ(tokens.size(), static_cast<std::size_t>(micro_batches * 2 * block.count * 64));
      std::vector<std::int32_t> mine;  // per micro-batch: this GPU's run of the inputs, then of the targets
      for (int mb = 0; mb < micro_batches; ++mb)
        for (int half = 0; half < 2; ++half) {
          const auto first = tokens.begin() + (2 * mb + half) * block.count * 64 + gpu % group * per_gpu;
          mine.insert(mine.end(), first, first + per_gpu);
        }
      if (group == 1) expected = mine;
      EXPECT_EQ(mine, expected) << "GPU " << gpu << ", group " << group;
    }
    // Micro-batch 1's inputs start with sequence 5 * 24 + 8 + 2 * gpu of the stream.
    EXPECT_EQ(expected[2 * per_gpu], stream.sequence(5 * 24 + 8 + 2 * gpu)[0]);
  }
  // Inputs of one block's sequences, targets of another's.
  const auto mixed = share_tokens(stream, 0, stage_share(2, 1, {0, 2}, {1, 1}));
  ASSERT_EQ(mixed.size(), 3u * 64);
  EXPECT_EQ(mixed[64], stream.sequence(1)[0]);
  EXPECT_EQ(mixed[128], stream.sequence(1)[1]);
  EXPECT_THROW(share_tokens(stream, 0, stage_share(2, 1, {1, 2}, {0, 1})), std::invalid_argument);
}

// Beside a Ulysses layer the embedding and the output layer read the GPU's shard of its block's rows
// (strategies/per_layer/per_layer.hpp's edge_rows): the shards of a run, one after another, are the run's inputs and
// its targets, a shard's last target the next shard's first input, and a shard may end inside a sample.
TEST(TokenStream, ShardsOfARunCutItsRowsInOrder) {
  const TokenStream stream{32000, 64, 11};
  const int stage_micro_batch = 2, micro_batches = 2, gpus = 4;
  const SequenceRun whole{0, 2};
  const auto all = share_tokens(stream, 3, stage_share(stage_micro_batch, micro_batches, whole, whole));
  const std::int64_t per_gpu = stage_micro_batch * 64 / gpus;  // half a sample
  for (int gpu = 0; gpu < gpus; ++gpu) {
    const EdgeRows rows = edge_rows({gpus, true}, gpus, stage_micro_batch, gpu);
    const SequenceRun run{rows.block.first, rows.block.count, rows.shard, rows.shards};
    EXPECT_EQ(run.rows(64), per_gpu);
    EXPECT_EQ(run.first_row(64), gpu * per_gpu);
    const auto mine = share_tokens(stream, 3, stage_share(stage_micro_batch, micro_batches, run, run));
    ASSERT_EQ(mine.size(), static_cast<std::size_t>(micro_batches * 2 * per_gpu));
    for (int mb = 0; mb < micro_batches; ++mb)
      for (int half = 0; half < 2; ++half)  // inputs, then targets
        for (std::int64_t i = 0; i < per_gpu; ++i)
          EXPECT_EQ(mine[(2 * mb + half) * per_gpu + i], all[(2 * mb + half) * 2 * 64 + gpu * per_gpu + i])
              << "GPU " << gpu << ", micro-batch " << mb << ", row " << i;
  }
  // Sample 0's first half: its targets end with the second half's first input.
  const auto first = share_tokens(stream, 0, stage_share(2, 1, {0, 1, 0, 2}, {0, 1, 0, 2}));
  EXPECT_EQ(first[2 * 32 - 1], stream.sequence(0)[32]);
  // Two shards of three samples: a shard starts inside sample 1 and takes sample 2 whole, its targets likewise;
  // shards that do not cut the rows equally are refused.
  const auto second = share_tokens(stream, 0, stage_share(3, 1, {0, 3, 1, 2}, {0, 3, 1, 2}));
  ASSERT_EQ(second.size(), 2u * 96);
  EXPECT_EQ(second[0], stream.sequence(1)[32]);
  EXPECT_EQ(second[32], stream.sequence(2)[0]);
  EXPECT_EQ(second[96 + 31], stream.sequence(1)[64]);
  EXPECT_EQ(second[96 + 32], stream.sequence(2)[1]);
  EXPECT_THROW(share_tokens(stream, 0, stage_share(2, 1, {0, 2, 0, 3}, {0, 2, 0, 3})), std::invalid_argument);
  EXPECT_THROW(share_tokens(stream, 0, stage_share(2, 1, {0, 2, 4, 4}, {0, 2, 0, 4})), std::invalid_argument);
}

// A per-layer plan file read back as twin execute reads it: each GPU's share fills exactly the micro-batches its
// embedding and output layer take (DenseBlock::start_iteration's count), half a sample beside Ulysses 2 at one
// sample per stage micro-batch; the plan's micro-batches are kept where a Ulysses home rounds the file's micro-batch
// size up to one sample (the file's strategy would count 2 samples per micro-batch over its 2 data-parallel GPUs).
TEST(TokenStream, PerLayerSharesFillTheExecutorsMicroBatches) {
  const LayerStrategy usp2{{2, true}, 0, Recompute::none}, tp2{{2, false}, 0, Recompute::none};
  const TokenStream stream{2048, testing::kUlyssesEdgeSeq, 3};
  for (const std::vector<LayerStrategy>& layers : {std::vector<LayerStrategy>{usp2, tp2, usp2},
                                                   std::vector<LayerStrategy>{usp2, usp2, usp2},
                                                   std::vector<LayerStrategy>{tp2, usp2, tp2}}) {
    const PlanGraphs lowered = plan_graphs(testing::ulysses_edge_plan(2, layers), "best.json");
    const PlanPart& part = lowered.parts.at(0);
    EXPECT_EQ(part.strategy.num_micro_batches, 2) << lowered.key;
    const std::int64_t embedding_rows = part.unit_execution(kEmbeddingUnit)->shapes.tokens;
    EXPECT_EQ(embedding_rows, layers.front().layout.ulysses ? testing::kUlyssesEdgeSeq / 2 : testing::kUlyssesEdgeSeq);
    const std::int64_t per_micro_batch = embedding_rows + part.unit_execution(kHeadUnit)->shapes.tokens;
    for (int rank = 0; rank < 2; ++rank)
      EXPECT_EQ(static_cast<std::int64_t>(share_tokens(stream, 0, rank_token_share(lowered, rank, 0)).size()),
                part.strategy.num_micro_batches * per_micro_batch)
          << lowered.key << ", GPU " << rank;
  }
}

// The shares the families state (strategies/families/rank_plan.hpp) read what execute.cpp read before from each
// family's plan: a data-parallel rank's contiguous share, an asymmetric pipeline's share after the earlier ones',
// the same share of packed rows, and a per-layer GPU's runs of each stage micro-batch.
TEST(TokenStream, FamilySharesReadTheSequencesOfTheirSplit) {
  const TokenStream stream{32000, 64, 7};
  TokenShare share;
  share.step_sequences = 8;
  share.first_sequence = 4;
  share.micro_batch_stride = 1;
  share.micro_batches = 4;
  share.inputs = share.targets = {0, 1};
  EXPECT_EQ(share_tokens(stream, 2, share), rank_iteration_tokens(stream, 2, 8, 2, 1, 1, 4));
  share.first_sequence = 5;
  share.micro_batches = 3;
  const auto pipeline = share_tokens(stream, 2, share);
  EXPECT_EQ(pipeline, batch_share_tokens(stream, 2, 8, 5, 1, 3));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(pipeline[2 * 64 + i], stream.sequence(2 * 8 + 6)[i]);  // micro-batch 1
  const PackedSteps steps(stream, {{64, {{32, 32}, {64}, {16}, {64}}}});
  share.step_sequences = 4;
  share.first_sequence = 2;
  share.micro_batches = 2;
  EXPECT_EQ(steps.rank_tokens(1, 0, share), steps.rank_tokens(1, 0, 2, 1, 1, 2));
  // A per-layer GPU: inputs of samples 4..7, targets of samples 6 and 7, of stage micro-batches of 8.
  share.step_sequences = 24;
  share.first_sequence = 0;
  share.micro_batch_stride = 8;
  share.micro_batches = 3;
  share.inputs = {4, 4};
  share.targets = {6, 2};
  const auto per_layer = share_tokens(stream, 1, share);
  ASSERT_EQ(per_layer.size(), 3u * 6 * 64);
  EXPECT_EQ(per_layer[6 * 64], stream.sequence(24 + 8 + 4)[0]);            // micro-batch 1's first input
  EXPECT_EQ(per_layer[6 * 64 + 4 * 64], stream.sequence(24 + 8 + 6)[1]);   // and its first target
  share.targets = {7, 2};  // past the micro-batch
  EXPECT_THROW(share_tokens(stream, 1, share), std::invalid_argument);
}

TEST(TokenStream, FollowsItsRuleNineTimesInTen) {
  const TokenStream stream{32000, 10000, 3};
  const auto tokens = stream.sequence(0);
  int follows = 0;
  for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
    EXPECT_LT(tokens[i], 1024);
    follows += tokens[i + 1] == (1103 * tokens[i] + 12345) % 1024;
  }
  EXPECT_NEAR(follows / 10000.0, 0.9, 0.01);
}

// Rows that pack sequences: each sequence is drawn whole with its own targets (none predicts across a
// boundary), the unfilled end of a row is one more sequence, and a sequence is named by its length and its
// ordinal among the step's sequences of that length: two packings of the same sequences give the same ones.
TEST(TokenStream, PackedRowsHoldWholeSequencesNamedByLengthAndOrdinal) {
  const TokenStream stream{32000, 8, 5};
  // Part 0: rows of 8 holding {4, 2 (+2)}, {8}, {3 (+5)}, {8}; part 1: rows of 4 holding {4}, {2, 2}.
  const PackedSteps steps(stream, {{8, {{4, 2}, {8}, {3}, {8}}}, {4, {{4}, {2, 2}}}});
  const auto tokens = steps.rank_tokens(1, 0, 2, 1, 1, 2);  // DP rank 1: rows 2 and 3
  ASSERT_EQ(tokens.size(), 2u * 2 * 8);
  const int per_step = 10;  // 7 sequences in part 0, 3 in part 1
  // Row 2 holds the first sequence of 3 tokens and the first of 5; row 3 the second of 8.
  const auto three = stream.sequence(per_step + 0, 3), five = stream.sequence(per_step + 0, 5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(tokens[i], three[i]);
    EXPECT_EQ(tokens[8 + i], three[i + 1]);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(tokens[3 + i], five[i]);
    EXPECT_EQ(tokens[8 + 3 + i], five[i + 1]);
  }
  const auto eight = stream.sequence(per_step + 1, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(tokens[16 + i], eight[i]);
  // Part 1 continues each length's count: its 4 is the second of that length (row 0 of part 0 held the first),
  // its 2s the third and fourth.
  const auto part1 = steps.rank_tokens(1, 1, 1, 0, 2, 1);
  const auto four = stream.sequence(per_step + 1, 4), two = stream.sequence(per_step + 3, 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(part1[i], four[i]);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(part1[4 + 2 + i], two[i]);
  // The same sequences packed otherwise: the first 3-token sequence is the same tokens.
  const PackedSteps other(stream, {{8, {{3}, {8}, {4, 2}, {8}}}, {4, {{4}, {2, 2}}}});
  const auto moved = other.rank_tokens(1, 0, 1, 0, 1, 4);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(moved[i], three[i]);
  EXPECT_THROW(PackedSteps(stream, {{8, {{9}}}}), std::invalid_argument);
  EXPECT_THROW(steps.rank_tokens(0, 0, 1, 0, 1, 3), std::invalid_argument);
}

// A CP rank holds chunks r and 2cp-1-r of each sequence, inputs and targets alike; the ranks together hold every
// token once.
TEST(TokenStream, ContextParallelRanksHoldTheirLoadBalancedChunks) {
  const TokenStream stream{32000, 64, 7};
  const int cp = 4, micro_batch_size = 2, micro_batches = 3;
  const auto whole = rank_iteration_tokens(stream, 1, 6, 1, 0, micro_batch_size, micro_batches);
  const std::int64_t chunk = 64 / (2 * cp), local = 64 / cp;
  std::vector<int> seen(whole.size(), 0);
  for (int r = 0; r < cp; ++r) {
    const auto share = context_parallel_share(whole, 64, micro_batch_size, micro_batches, cp, r);
    ASSERT_EQ(share.size(), whole.size() / cp);
    for (std::size_t sequence = 0; sequence < whole.size() / 64; ++sequence)  // inputs and targets of each
      for (std::int64_t i = 0; i < local; ++i) {
        const std::int64_t c = i < chunk ? r : 2 * cp - 1 - r;
        const std::size_t from = sequence * 64 + static_cast<std::size_t>(c * chunk + i % chunk);
        EXPECT_EQ(share[sequence * local + static_cast<std::size_t>(i)], whole[from]);
        ++seen[from];
      }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  EXPECT_THROW(context_parallel_share(whole, 64, micro_batch_size, micro_batches, 3, 0), std::invalid_argument);
  EXPECT_THROW(context_parallel_share(whole, 64, micro_batch_size, micro_batches, cp, cp), std::invalid_argument);
}

}  // namespace
}  // namespace twin::exec

namespace twin::exec {
namespace {

// An asymmetric plan's pipelines take consecutive shares of the batch: equal shares are the data-parallel ranks'.
TEST(TokenStream, BatchSharesTileTheGlobalBatch) {
  const TokenStream stream{512, 16, 3};
  EXPECT_EQ(batch_share_tokens(stream, 2, 8, 4, 2, 2), rank_iteration_tokens(stream, 2, 8, 2, 1, 2, 2));
  // Five sequences, then three: the second share starts where the first ends.
  const std::vector<std::int32_t> first = batch_share_tokens(stream, 1, 8, 0, 1, 5);
  const std::vector<std::int32_t> second = batch_share_tokens(stream, 1, 8, 5, 1, 3);
  const std::vector<std::int32_t> whole = rank_iteration_tokens(stream, 1, 8, 1, 0, 1, 8);
  std::vector<std::int32_t> joined = first;
  joined.insert(joined.end(), second.begin(), second.end());
  EXPECT_EQ(joined, whole);
  EXPECT_THROW(batch_share_tokens(stream, 1, 8, 6, 1, 3), std::invalid_argument);
}

}  // namespace
}  // namespace twin::exec
