// Hot switching's workload (HotSPa): the global batch's sequences by length, a length range of them packed
// into micro-batches of the range's maximum (HotSPa's greedy packing), and the scenario a phase is lowered
// with. Packs run varlen attention, so a phase's attention is priced by the sum of its squared lengths.
#pragma once
#include <cstdint>
#include <vector>

#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "strategies/flops.hpp"

namespace twin {

// The iteration's global_batch_size sequences by length, increasing: the histogram's counts scaled to the
// batch (largest remainders rounded up, ties to the shorter length), or each bucket's share at its max.
std::vector<SeqLengthCount> batch_sequences(const Scenario& scenario);

// The sequences with length in (min_exclusive, max_length], packed into packs of max_length tokens.
struct PhaseWorkload {
  std::int64_t min_exclusive = 0;
  std::int64_t max_length = 0;
  std::int64_t sequences = 0;
  std::int64_t tokens = 0;
  std::int64_t packs = 0;          // HotSPa's greedy packing (longest first, filled with the shortest)
  double squared_lengths = 0;      // sum of length^2: the causal varlen attention work
  bool empty() const { return sequences == 0; }
};
PhaseWorkload pack_range(const std::vector<SeqLengthCount>& batch, std::int64_t min_exclusive, std::int64_t max_length);
// HotSPa's packing on explicit lengths (any order): packs of at most `capacity` tokens, each the longest
// sequence left filled with the shortest ones that still fit; a pack's lengths in the order packed.
std::vector<std::vector<std::int64_t>> greedy_packs(std::vector<std::int64_t> lengths, std::int64_t capacity);
// The number of greedy_packs.
std::int64_t greedy_pack_count(std::vector<std::int64_t> lengths, std::int64_t capacity);
// A phase's packs as its iteration trains them: greedy_packs of its sequences, then padding packs up to
// `packs` (padded_packs), each one sequence of max_length (a padded pack's GEMMs run whatever it holds).
std::vector<std::vector<std::int64_t>> phase_packs(const std::vector<SeqLengthCount>& batch,
                                                   const PhaseWorkload& workload, std::int64_t packs);

// Where buckets may end: the scenario's bucket maxima, else the powers of two from the shortest length up
// (and the longest length), keeping only ends with sequences below them; the last is the longest length.
std::vector<std::int64_t> candidate_boundaries(const Scenario& scenario, const std::vector<SeqLengthCount>& batch);

// The packs rounded up to whole micro-batch steps of `strategy` (data_parallel_size * micro_batch_size);
// strategy must have its data_parallel_size derived.
std::int64_t padded_packs(const PhaseWorkload& workload, const Strategy& strategy);
// The scenario a phase is lowered with: sequences of max_length, `packs` of them per iteration.
Scenario phase_scenario(const Scenario& scenario, const PhaseWorkload& workload, std::int64_t packs);
// A pack's causal varlen attention relative to one causal sequence of max_length: squared_lengths /
// (packs * max_length^2).
double attention_scale(const PhaseWorkload& workload, std::int64_t packs);
// Scales the key/value length and FLOPs of every attention op by `scale` (varlen packs).
void scale_attention(IterationGraph& graph, double scale);

// Throughput of an iteration that trains `phases` (their sequences, each with its strategy's recompute):
// tokens are real tokens, model FLOPs are Megatron's per sequence of its own length.
Throughput phases_throughput(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                             const std::vector<PhaseWorkload>& phases, const std::vector<Strategy>& strategies,
                             double iteration_s);

}  // namespace twin
