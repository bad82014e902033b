// Training data made by the program: sequences that follow a learnable rule (each next token is an
// affine function of the previous one, 90% of the time; otherwise random), so the loss must fall. A
// sequence depends only on (seed, its global index), so every split of the batch sees the same data.
#pragma once
#include <cstdint>
#include <vector>

#include "strategies/families/rank_plan.hpp"

namespace twin::exec {

struct TokenStream {
  std::int64_t vocab_size = 32000;
  std::int64_t seq_length = 4096;
  std::uint64_t seed = 1;
  // Tokens are drawn from the first min(vocab, 1024) ids: with the whole vocabulary each token pair
  // would be seen too rarely for the loss to fall within a short run.
  std::int64_t data_vocab() const { return vocab_size < 1024 ? vocab_size : 1024; }
  // seq_length + 1 tokens: inputs are [0, seq), targets [1, seq].
  std::vector<std::int32_t> sequence(std::int64_t index) const { return sequence(index, seq_length); }
  // length + 1 tokens of sequence `index` of that length.
  std::vector<std::int32_t> sequence(std::int64_t index, std::int64_t length) const;
};

// One rank's tokens for one iteration of a part whose rows are sequences: the sequences `share` names (its plan's
// family says which, strategies/families/rank_plan.hpp), laid out as the executor reads them: per micro-batch,
// the inputs of its `inputs` run [run.rows(seq)], then the targets of its `targets` run (a run of several shards:
// its shard of the rows, so a target follows its input within the sequence even across a shard's edge). Throws
// std::invalid_argument for a run outside the micro-batch's stride, a shard that does not cut its run's rows
// equally, or a share outside the step's batch.
std::vector<std::int32_t> share_tokens(const TokenStream& stream, int iteration, const TokenShare& share);

// The share of data-parallel rank r of a uniform plan: the r-th contiguous share of the global batch,
// micro-batches taking consecutive sequences of it (share_tokens of that share).
std::vector<std::int32_t> rank_iteration_tokens(const TokenStream& stream, int iteration, std::int64_t global_batch,
                                                int data_parallel_size, int data_parallel_rank, int micro_batch_size,
                                                int micro_batches);

// The same layout for a share of the global batch that starts at sequence `first_sequence` (an asymmetric plan's
// pipeline: its micro_batch_size * micro_batches sequences after the earlier pipelines').
std::vector<std::int32_t> batch_share_tokens(const TokenStream& stream, int iteration, std::int64_t global_batch,
                                             std::int64_t first_sequence, int micro_batch_size, int micro_batches);

// A context-parallel rank's share of rank_iteration_tokens' layout: of each sequence (inputs and targets
// alike), chunks r and 2cp-1-r of 2cp, in that order (Megatron's load-balanced sharding for causal attention).
std::vector<std::int32_t> context_parallel_share(const std::vector<std::int32_t>& tokens, std::int64_t seq_length,
                                                 int micro_batch_size, int micro_batches, int context_parallel_size,
                                                 int context_parallel_rank);

// The sequences of a step whose rows pack several (hot switching's parts): row k of a part holds sequences of
// packs[k]'s lengths one after another, its unfilled end one more. A sequence is named by its length and its
// ordinal among the step's sequences of that length, counted over the parts in run order and each part's
// rows in order, so that two plans packing the same sequences differently train on the same tokens.
struct PackedPart {
  std::int64_t row_length = 0;                    // tokens per row
  std::vector<std::vector<std::int64_t>> packs;   // per row, its sequences' lengths
};

class PackedSteps {
 public:
  // `parts` in run order; the stream's seq_length is not used (rows have their parts' lengths).
  PackedSteps(TokenStream stream, const std::vector<PackedPart>& parts);
  // One rank's tokens of part `part` in `iteration`, the rows `share` names (its runs whole micro-batches), laid out
  // as share_tokens lays them out: each sequence with its own targets, so that no token predicts across a sequence
  // boundary.
  std::vector<std::int32_t> rank_tokens(int iteration, std::size_t part, const TokenShare& share) const;
  // The rows of data-parallel rank r of `data_parallel_size` (its contiguous share, as rank_iteration_tokens').
  std::vector<std::int32_t> rank_tokens(int iteration, std::size_t part, int data_parallel_size,
                                        int data_parallel_rank, int micro_batch_size, int micro_batches) const;

 private:
  TokenStream stream_;
  std::vector<std::int64_t> row_lengths_;                      // per part
  std::vector<std::vector<std::vector<std::int64_t>>> rows_;   // per part, per row: its sequences' lengths
  std::vector<std::vector<std::vector<std::int64_t>>> names_;  // per part, per row: each sequence's ordinal
  std::int64_t sequences_per_step_ = 0;
};

}  // namespace twin::exec
