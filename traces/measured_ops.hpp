// Measured kernels joined to the ops of a rank class: the executor wraps each op's launches in a CUPTI
// region whose id encodes (iteration, op index), and the join turns one rank's kernel records back into
// per-op measured durations and per-iteration spans. Plain C++: the CUDA side converts its records.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "core/units.hpp"

namespace twin {

inline constexpr OpIndex kNoOp = std::numeric_limits<OpIndex>::max();

// One kernel (or memcpy) the GPU ran, with device timestamps in ns. iteration -1 and op kNoOp: launched
// outside any op region (the executor's own bookkeeping, a library's setup kernel).
struct MeasuredKernel {
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t stream_id = 0;
  std::int32_t iteration = -1;
  OpIndex op = kNoOp;

  bool in_op() const { return op != kNoOp; }
};

struct RegionId {
  std::int32_t iteration = -1;
  OpIndex op = kNoOp;
};

// region = (iteration + 1) << 32 | (op + 1); 0 means "no region". Throws std::invalid_argument for an
// iteration < 0 or op == kNoOp (they would not round-trip).
std::uint64_t encode_region(std::int32_t iteration, OpIndex op);
// 0 gives {-1, kNoOp}; throws std::invalid_argument for an id that encode_region cannot produce
// (exactly one of the two halves zero, or an iteration past INT32_MAX).
RegionId decode_region(std::uint64_t region);

// A CUPTI record's fields as a MeasuredKernel (region decoded).
MeasuredKernel measured_kernel(std::string name, std::uint64_t start_ns, std::uint64_t end_ns,
                               std::uint32_t stream_id, std::uint64_t region);

// One op over the measured iterations. Its duration in an iteration is the last end minus the first
// start of its kernels in that iteration (gaps between them included: the op occupies the GPU that long).
// An op with no kernel in any iteration (a no-op, or one the executor ran on the host) is "absent":
// median/min/max empty.
struct OpMeasurement {
  std::vector<std::optional<TimeNs>> duration_ns;  // per iteration, parallel to MeasuredRank::iterations
  std::optional<TimeNs> median_ns;                 // over the iterations where the op ran
  std::optional<TimeNs> min_ns;
  std::optional<TimeNs> max_ns;
  int kernels = 0;                                 // the most kernels the op ran in one iteration
  std::vector<std::uint32_t> stream_ids;           // CUDA streams its kernels ran on, ascending
  // Measured iterations in which this compute op's span overlapped the span of a compute op of another graph
  // stream (double strand's two strands, at once or interleaved) or of a NCCL kernel (a collective, a pipeline
  // receive waiting for its sender): there its duration is not its time alone.
  int shared_gpu_iterations = 0;
};

struct IterationSpan {
  std::int32_t iteration = 0;
  TimeNs start_ns = 0;   // first kernel start of the iteration on this rank
  TimeNs end_ns = 0;     // last kernel end
  TimeNs span_ns() const { return end_ns - start_ns; }
};

// Everything measured on one rank, joined to its rank class.
struct MeasuredRank {
  int rank = 0;
  int rank_class = 0;
  std::vector<std::int32_t> iterations;        // measured iterations, ascending
  std::vector<OpMeasurement> ops;              // indexed by OpIndex, one per op of the class
  std::vector<IterationSpan> iteration_spans;  // parallel to iterations
  std::optional<TimeNs> median_iteration_ns;   // median of the spans
  std::int64_t kernels_outside_ops = 0;        // records with no region
};

// Throws std::invalid_argument for a record naming an op index outside the class, an op without an
// iteration (or the reverse), or a record that ends before it starts; the message names the rank.
void check_measured_kernels(const RankClass& rank_class, const std::vector<MeasuredKernel>& kernels, int rank);

// Joins one rank's records (any order) to `rank_class`. Iterations are those that appear in the
// records. Throws as check_measured_kernels does.
MeasuredRank join_measured_ops(const RankClass& rank_class, const std::vector<MeasuredKernel>& kernels, int rank);

// The median of non-empty `values` (order irrelevant); for an even count the lower midpoint of the two
// middle values (std::midpoint), so that times stay integer nanoseconds.
TimeNs median_ns(std::vector<TimeNs> values);

// measured / predicted - 1; empty when either is missing or predicted is 0 (no ratio to speak of).
std::optional<double> relative_error(std::optional<TimeNs> measured_ns, std::optional<TimeNs> predicted_ns);

}  // namespace twin
