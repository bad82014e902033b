// Training data made by the program: sequences that follow a learnable rule (each next token is an
// affine function of the previous one, 90% of the time; otherwise random), so the loss must fall. A
// sequence depends only on (seed, its global index), so every split of the batch sees the same data.
#pragma once
#include <cstdint>
#include <vector>

namespace twin::exec {

struct TokenStream {
  std::int64_t vocab_size = 32000;
  std::int64_t seq_length = 4096;
  std::uint64_t seed = 1;
  // Tokens are drawn from the first min(vocab, 1024) ids: with the whole vocabulary each token pair
  // would be seen too rarely for the loss to fall within a short run.
  std::int64_t data_vocab() const { return vocab_size < 1024 ? vocab_size : 1024; }
  // seq_length + 1 tokens: inputs are [0, seq), targets [1, seq].
  std::vector<std::int32_t> sequence(std::int64_t index) const;
};

// One rank's tokens for one iteration, laid out as the executor reads them: per micro-batch, the
// micro-batch's inputs [mbs * seq] then its targets [mbs * seq]. Data-parallel rank r takes the r-th
// contiguous share of the global batch; micro-batches take consecutive sequences of it.
std::vector<std::int32_t> rank_iteration_tokens(const TokenStream& stream, int iteration, std::int64_t global_batch,
                                                int data_parallel_size, int data_parallel_rank, int micro_batch_size,
                                                int micro_batches);

}  // namespace twin::exec
