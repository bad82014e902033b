// splitmix64 of (seed, sequence, position): cheap, stateless, the same on every rank.
#include "executor/token_stream.hpp"

#include <stdexcept>

namespace twin::exec {
namespace {

std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<std::int32_t> TokenStream::sequence(std::int64_t index) const {
  const std::uint64_t vocab = static_cast<std::uint64_t>(data_vocab());
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(seq_length + 1));
  std::uint64_t state = mix(seed ^ mix(static_cast<std::uint64_t>(index)));
  std::uint64_t token = state % vocab;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>(token);
    state = mix(state);
    const bool follows_rule = (state >> 32) % 10 != 0;
    token = follows_rule ? (1103 * token + 12345) % vocab : (state & 0xFFFFFFFFull) % vocab;
  }
  return tokens;
}

std::vector<std::int32_t> rank_iteration_tokens(const TokenStream& stream, int iteration, std::int64_t global_batch,
                                                int data_parallel_size, int data_parallel_rank, int micro_batch_size,
                                                int micro_batches) {
  const std::int64_t per_rank = global_batch / data_parallel_size;
  if (per_rank != static_cast<std::int64_t>(micro_batch_size) * micro_batches)
    throw std::invalid_argument("rank_iteration_tokens: the global batch does not split into these micro-batches");
  const std::int64_t seq = stream.seq_length, tokens = micro_batch_size * seq;
  std::vector<std::int32_t> out(static_cast<std::size_t>(2 * micro_batches * tokens));
  for (int mb = 0; mb < micro_batches; ++mb)
    for (int b = 0; b < micro_batch_size; ++b) {
      const std::int64_t index = iteration * global_batch + data_parallel_rank * per_rank +
                                 static_cast<std::int64_t>(mb) * micro_batch_size + b;
      const std::vector<std::int32_t> sequence = stream.sequence(index);
      std::int32_t* inputs = out.data() + 2 * mb * tokens + b * seq;
      std::int32_t* targets = inputs + tokens;
      for (std::int64_t i = 0; i < seq; ++i) {
        inputs[i] = sequence[static_cast<std::size_t>(i)];
        targets[i] = sequence[static_cast<std::size_t>(i + 1)];
      }
    }
  return out;
}

}  // namespace twin::exec
