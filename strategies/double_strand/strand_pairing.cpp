// The pairing DP over op prefixes (i forward ops, j backward ops done). Choosing a segmentation and an
// alignment at once is the same optimum as DHeLlam's enumeration of segmentations followed by its
// edit-distance DP over segments, in O(F * B * s^2) estimates for sublists of at most s ops.
#include "strategies/double_strand/strand_pairing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace twin {
namespace {

// The streams of communication a segment uses, as a bit set.
unsigned comm_streams(const StrandOp* ops, int count) {
  unsigned mask = 0;
  for (int k = 0; k < count; ++k)
    if (ops[k].is_communication()) mask |= 1u << static_cast<unsigned>(ops[k].stream);
  return mask;
}

TimeNs serial_time_ns(const StrandOp* ops, int count) {
  TimeNs total = 0;
  for (int k = 0; k < count; ++k) total += ops[k].time_ns;
  return total;
}

// How much slower an op runs beside the other strand's current op (or alone: other == nullptr).
double slowdown(const StrandOp& mine, const StrandOp* other, const OverlapProfile& overlap) {
  if (!other) return 1.0;
  if (mine.is_communication() == other->is_communication()) return 2.0;
  return mine.is_communication() ? overlap.communication_slowdown : overlap.compute_slowdown;
}

}  // namespace

std::vector<int> sublist_ends(const std::vector<StrandOp>& strand) {
  const int n = static_cast<int>(strand.size());
  std::vector<int> ends(strand.size());
  int end = n;
  for (int k = n - 1; k >= 0; --k) {
    if (strand[k].is_communication()) {
      ends[k] = k + 1;
      end = k;
    } else {
      ends[k] = end;
    }
  }
  return ends;
}

TimeNs paired_time_ns(const StrandOp* forward, int forward_count, const StrandOp* backward, int backward_count,
                      const OverlapProfile& overlap) {
  if (forward_count == 0) return serial_time_ns(backward, backward_count);
  if (backward_count == 0) return serial_time_ns(forward, forward_count);
  // Sweep: both sides work on their current op; at each step the op that ends first ends.
  int f = 0, b = 0;
  double f_left = static_cast<double>(forward[0].time_ns), b_left = static_cast<double>(backward[0].time_ns);
  double now = 0;
  while (f < forward_count || b < backward_count) {
    const StrandOp* fop = f < forward_count ? &forward[f] : nullptr;
    const StrandOp* bop = b < backward_count ? &backward[b] : nullptr;
    const double f_rate = fop ? 1.0 / slowdown(*fop, bop, overlap) : 0;
    const double b_rate = bop ? 1.0 / slowdown(*bop, fop, overlap) : 0;
    const double f_end = fop ? f_left / f_rate : std::numeric_limits<double>::infinity();
    const double b_end = bop ? b_left / b_rate : std::numeric_limits<double>::infinity();
    const double step = std::min(f_end, b_end);
    now += step;
    if (fop) f_left -= step * f_rate;
    if (bop) b_left -= step * b_rate;
    if (fop && f_end <= b_end) {
      if (++f < forward_count) f_left = static_cast<double>(forward[f].time_ns);
    }
    if (bop && b_end <= f_end) {
      if (++b < backward_count) b_left = static_cast<double>(backward[b].time_ns);
    }
  }
  return static_cast<TimeNs>(std::llround(now));
}

StrandPairing pair_strands(const std::vector<StrandOp>& forward, const std::vector<StrandOp>& backward,
                           const OverlapProfile& overlap) {
  const int nf = static_cast<int>(forward.size()), nb = static_cast<int>(backward.size());
  const std::vector<int> f_ends = sublist_ends(forward), b_ends = sublist_ends(backward);
  constexpr TimeNs kUnreached = std::numeric_limits<TimeNs>::max();
  const auto at = [&](int i, int j) { return static_cast<std::size_t>(i) * (nb + 1) + j; };
  std::vector<TimeNs> best(static_cast<std::size_t>(nf + 1) * (nb + 1), kUnreached);
  std::vector<PairedBlock> last(best.size());
  best[at(0, 0)] = 0;
  const StrandOp* F = forward.data();
  const StrandOp* B = backward.data();
  const auto relax = [&](int i, int j, const PairedBlock& block, TimeNs time) {
    const std::size_t to = at(block.forward_end, block.backward_end);
    const TimeNs total = best[at(i, j)] + time;
    if (total < best[to]) {
      best[to] = total;
      last[to] = block;
    }
  };
  for (int i = 0; i <= nf; ++i) {
    for (int j = 0; j <= nb; ++j) {
      if (best[at(i, j)] == kUnreached) continue;
      const int f_limit = i < nf ? f_ends[i] : i;
      const int b_limit = j < nb ? b_ends[j] : j;
      for (int i2 = i + 1; i2 <= f_limit; ++i2)
        relax(i, j, {i, i2, j, j}, serial_time_ns(F + i, i2 - i));
      for (int j2 = j + 1; j2 <= b_limit; ++j2)
        relax(i, j, {i, i, j, j2}, serial_time_ns(B + j, j2 - j));
      for (int i2 = i + 1; i2 <= f_limit; ++i2) {
        const unsigned f_comm = comm_streams(F + i, i2 - i);
        for (int j2 = j + 1; j2 <= b_limit; ++j2) {
          if (f_comm & comm_streams(B + j, j2 - j)) continue;  // never two communications of one kind
          relax(i, j, {i, i2, j, j2}, paired_time_ns(F + i, i2 - i, B + j, j2 - j, overlap));
        }
      }
    }
  }
  StrandPairing pairing;
  pairing.estimated_ns = best[at(nf, nb)];
  pairing.serial_ns = serial_time_ns(F, nf) + serial_time_ns(B, nb);
  for (int i = nf, j = nb; i > 0 || j > 0;) {
    const PairedBlock& block = last[at(i, j)];
    pairing.blocks.push_back(block);
    i = block.forward_begin;
    j = block.backward_begin;
  }
  std::reverse(pairing.blocks.begin(), pairing.blocks.end());
  return pairing;
}

}  // namespace twin
