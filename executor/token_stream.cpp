// splitmix64 of (seed, sequence, position): cheap, stateless, the same on every rank.
#include "executor/token_stream.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "core/splitmix.hpp"
#include "strategies/rank_layout.hpp"

namespace twin::exec {

std::vector<std::int32_t> TokenStream::sequence(std::int64_t index, std::int64_t length) const {
  const std::uint64_t vocab = static_cast<std::uint64_t>(data_vocab());
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(length + 1));
  // The length enters the state: sequences of two lengths with one index are unrelated.
  std::uint64_t state = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(index)) ^
                                   splitmix64(~static_cast<std::uint64_t>(length)));
  std::uint64_t token = state % vocab;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>(token);
    state = splitmix64(state);
    const bool follows_rule = (state >> 32) % 10 != 0;
    token = follows_rule ? (1103 * token + 12345) % vocab : (state & 0xFFFFFFFFull) % vocab;
  }
  return tokens;
}

namespace {

// Throws unless every micro-batch's runs lie within its stride and the share within the step's `rows`, and each
// run's rows cut into its shards (sequences of `seq_length` rows).
void check_share(const TokenShare& share, std::int64_t rows, std::int64_t seq_length, const char* who) {
  for (const SequenceRun& run : {share.inputs, share.targets}) {
    if (run.first < 0 || run.count < 1 || run.first + run.count > share.micro_batch_stride)
      throw std::invalid_argument(std::string(who) + ": a run of sequences outside the micro-batch");
    if (run.shards < 1 || run.shard < 0 || run.shard >= run.shards || run.count * seq_length % run.shards != 0)
      throw std::invalid_argument(std::string(who) + ": a shard of a run that does not cut its rows equally");
  }
  if (share.first_sequence < 0 || share.micro_batches < 1 ||
      share.first_sequence + share.micro_batch_stride * share.micro_batches > rows)
    throw std::invalid_argument(std::string(who) + ": the share does not lie in the step's batch");
}

TokenShare contiguous_share(std::int64_t first_sequence, int micro_batch_size, int micro_batches) {
  TokenShare share;
  share.first_sequence = first_sequence;
  share.micro_batch_stride = micro_batch_size;
  share.micro_batches = micro_batches;
  share.inputs = share.targets = {0, micro_batch_size};
  return share;
}

}  // namespace

std::vector<std::int32_t> share_tokens(const TokenStream& stream, int iteration, const TokenShare& share) {
  const std::int64_t seq = stream.seq_length;
  check_share(share, share.step_sequences, seq, "share_tokens");
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(share.micro_batches * (share.inputs.rows(seq) + share.targets.rows(seq))));
  // The inputs [0, seq) or the targets [1, seq] of a run's sequences, one after another: of those rows, the run's
  // shard [first_row, first_row + rows).
  const auto append = [&](int mb, SequenceRun run, std::int64_t shift) {
    const std::int64_t first_row = run.first_row(seq), end_row = first_row + run.rows(seq);
    for (int b = run.first; b < run.first + run.count; ++b) {
      const std::int64_t begin = std::max(first_row, (b - run.first) * seq);
      const std::int64_t end = std::min(end_row, (b - run.first + 1) * seq);
      if (begin >= end) continue;
      const std::vector<std::int32_t> sequence = stream.sequence(
          iteration * share.step_sequences + share.first_sequence + mb * share.micro_batch_stride + b);
      const auto from = sequence.begin() + shift + (begin - (b - run.first) * seq);
      out.insert(out.end(), from, from + (end - begin));
    }
  };
  for (int mb = 0; mb < share.micro_batches; ++mb) {
    append(mb, share.inputs, 0);
    append(mb, share.targets, 1);
  }
  return out;
}

std::vector<std::int32_t> rank_iteration_tokens(const TokenStream& stream, int iteration, std::int64_t global_batch,
                                                int data_parallel_size, int data_parallel_rank, int micro_batch_size,
                                                int micro_batches) {
  const std::int64_t per_rank = global_batch / data_parallel_size;
  if (per_rank != static_cast<std::int64_t>(micro_batch_size) * micro_batches)
    throw std::invalid_argument("rank_iteration_tokens: the global batch does not split into these micro-batches");
  return batch_share_tokens(stream, iteration, global_batch, data_parallel_rank * per_rank, micro_batch_size,
                            micro_batches);
}

std::vector<std::int32_t> batch_share_tokens(const TokenStream& stream, int iteration, std::int64_t global_batch,
                                             std::int64_t first_sequence, int micro_batch_size, int micro_batches) {
  TokenShare share = contiguous_share(first_sequence, micro_batch_size, micro_batches);
  share.step_sequences = global_batch;
  return share_tokens(stream, iteration, share);
}

std::vector<std::int32_t> context_parallel_share(const std::vector<std::int32_t>& tokens, std::int64_t seq_length,
                                                 int micro_batch_size, int micro_batches, int cp, int cp_rank) {
  const std::int64_t sequences = static_cast<std::int64_t>(micro_batch_size) * micro_batches;
  if (cp < 1 || cp_rank < 0 || cp_rank >= cp || seq_length % (2 * cp) != 0 ||
      static_cast<std::int64_t>(tokens.size()) != 2 * sequences * seq_length)
    throw std::invalid_argument("context_parallel_share: the sequences do not split into 2 * cp equal chunks");
  const std::int64_t chunk = seq_length / (2 * cp);
  std::vector<std::int32_t> out;
  out.reserve(tokens.size() / static_cast<std::size_t>(cp));
  // Each micro-batch's inputs then its targets: 2 * micro_batches runs of micro_batch_size sequences.
  for (std::int64_t sequence = 0; sequence < 2 * sequences; ++sequence)
    for (int c : context_chunks_of(cp_rank, cp)) {
      const auto first = tokens.begin() + sequence * seq_length + c * chunk;
      out.insert(out.end(), first, first + chunk);
    }
  return out;
}

PackedSteps::PackedSteps(TokenStream stream, const std::vector<PackedPart>& parts) : stream_(stream) {
  std::map<std::int64_t, std::int64_t> next_of_length;
  for (const auto& [row_length, packs] : parts) {
    row_lengths_.push_back(row_length);
    std::vector<std::vector<std::int64_t>>& rows = rows_.emplace_back();
    std::vector<std::vector<std::int64_t>>& names = names_.emplace_back();
    for (const std::vector<std::int64_t>& pack : packs) {
      std::vector<std::int64_t> row = pack;
      std::int64_t used = 0;
      for (std::int64_t length : pack) {
        if (length <= 0) throw std::invalid_argument("PackedSteps: a sequence of no tokens");
        used += length;
      }
      if (used > row_length) throw std::invalid_argument("PackedSteps: a pack longer than its row");
      if (used < row_length) row.push_back(row_length - used);
      std::vector<std::int64_t>& row_names = names.emplace_back();
      for (std::int64_t length : row) row_names.push_back(next_of_length[length]++);
      sequences_per_step_ += static_cast<std::int64_t>(row.size());
      rows.push_back(std::move(row));
    }
  }
}

std::vector<std::int32_t> PackedSteps::rank_tokens(int iteration, std::size_t part, int data_parallel_size,
                                                   int data_parallel_rank, int micro_batch_size,
                                                   int micro_batches) const {
  const auto global_batch = static_cast<std::int64_t>(rows_.at(part).size());
  const std::int64_t per_rank = global_batch / data_parallel_size;
  if (global_batch % data_parallel_size != 0 || per_rank != static_cast<std::int64_t>(micro_batch_size) * micro_batches)
    throw std::invalid_argument("PackedSteps: the packs do not split into these micro-batches");
  return rank_tokens(iteration, part, contiguous_share(data_parallel_rank * per_rank, micro_batch_size, micro_batches));
}

std::vector<std::int32_t> PackedSteps::rank_tokens(int iteration, std::size_t part, const TokenShare& share) const {
  const std::vector<std::vector<std::int64_t>>& rows = rows_.at(part);
  check_share(share, static_cast<std::int64_t>(rows.size()), row_lengths_.at(part), "PackedSteps");
  if (share.inputs != share.targets || share.inputs.first != 0 || share.inputs.count != share.micro_batch_stride ||
      share.inputs.shards != 1)
    throw std::invalid_argument("PackedSteps: a share of rows that are not whole micro-batches");
  const int micro_batch_size = share.inputs.count;
  const std::int64_t seq = row_lengths_.at(part), tokens = micro_batch_size * seq;
  std::vector<std::int32_t> out(static_cast<std::size_t>(2 * share.micro_batches * tokens));
  for (int mb = 0; mb < share.micro_batches; ++mb)
    for (int b = 0; b < micro_batch_size; ++b) {
      const std::size_t row = static_cast<std::size_t>(share.first_sequence + mb * micro_batch_size + b);
      std::int32_t* inputs = out.data() + 2 * mb * tokens + b * seq;
      std::int32_t* targets = inputs + tokens;
      for (std::size_t k = 0; k < rows[row].size(); ++k) {
        const std::int64_t length = rows[row][k];
        const std::vector<std::int32_t> sequence =
            stream_.sequence(iteration * sequences_per_step_ + names_.at(part)[row][k], length);
        for (std::int64_t i = 0; i < length; ++i) {
          *inputs++ = sequence[static_cast<std::size_t>(i)];
          *targets++ = sequence[static_cast<std::size_t>(i + 1)];
        }
      }
    }
  return out;
}

}  // namespace twin::exec
