// Double-strand pairing (DHeLlam's "SI plan", seeds.md §3.4): which segments of one unit's forward ops
// co-execute with which segments of another unit's backward ops, chosen by a 2-D dynamic programme over
// estimated times so that each strand's communication hides under the other strand's computation.
#pragma once
#include <vector>

#include "cost/profile.hpp"
#include "core/op.hpp"
#include "core/units.hpp"

namespace twin {

// One op of a strand, as the pairing sees it: its time alone and its stream (Stream::compute for
// compute; the communication stream, e.g. tp_comm, for a collective or a ring-attention send).
struct StrandOp {
  TimeNs time_ns = 0;
  Stream stream = Stream::compute;
  bool is_communication() const { return stream != Stream::compute; }
};

// Ops [forward_begin, forward_end) of the forward strand run beside ops [backward_begin, backward_end)
// of the backward strand; either range may be empty (a segment that runs alone).
struct PairedBlock {
  int forward_begin = 0, forward_end = 0;
  int backward_begin = 0, backward_end = 0;
  bool operator==(const PairedBlock&) const = default;
};

struct StrandPairing {
  std::vector<PairedBlock> blocks;   // in execution order; together they cover both strands once
  TimeNs estimated_ns = 0;           // the sum of the blocks' estimated times
  TimeNs serial_ns = 0;              // both strands' ops one after another
};

// The pruned boundaries: every communication op is a sublist of its own, the compute ops between two
// of them one sublist. Returns, for each op, one past the last op of its sublist.
std::vector<int> sublist_ends(const std::vector<StrandOp>& strand);

// Estimated time of two segments run side by side, each in its own order, in the engine's fluid model:
// two compute ops share the GPU (each at half rate), compute beside communication runs
// overlap.compute_slowdown slower and the communication overlap.communication_slowdown slower, two
// communication ops share the links (each at half rate); alone, each runs at its own speed.
TimeNs paired_time_ns(const StrandOp* forward, int forward_count, const StrandOp* backward, int backward_count,
                      const OverlapProfile& overlap);

// The optimal alignment over every segmentation inside the sublists: D[i][j] is the least time to run
// the first i forward and the first j backward ops; a step appends a forward segment alone, a backward
// segment alone, or a pair, never two segments that both use the same communication stream. Ties keep
// the first candidate in a fixed order (deterministic).
StrandPairing pair_strands(const std::vector<StrandOp>& forward, const std::vector<StrandOp>& backward,
                           const OverlapProfile& overlap);

}  // namespace twin
