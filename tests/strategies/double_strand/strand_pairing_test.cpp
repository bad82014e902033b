// The double-strand pairing DP: its sublists, its pair-time estimate (closed forms of the fluid model)
// and the plans it chooses on strands small enough to solve by hand.
#include <gtest/gtest.h>

#include "strategies/double_strand/strand_pairing.hpp"

namespace twin {
namespace {

StrandOp compute(TimeNs ns) { return {ns, Stream::compute}; }
StrandOp tp(TimeNs ns) { return {ns, Stream::tp_comm}; }

TimeNs pair_time(const std::vector<StrandOp>& f, const std::vector<StrandOp>& b, OverlapProfile overlap = {}) {
  return paired_time_ns(f.data(), static_cast<int>(f.size()), b.data(), static_cast<int>(b.size()), overlap);
}

TEST(StrandPairing, SublistsSplitAtEveryCommunicationOp) {
  const std::vector<StrandOp> strand = {compute(1), tp(1), compute(1), compute(1), compute(1), tp(1), tp(1), compute(1)};
  EXPECT_EQ(sublist_ends(strand), (std::vector<int>{1, 2, 5, 5, 5, 6, 7, 8}));
}

TEST(StrandPairing, PairTimesFollowTheFluidModel) {
  // Compute beside compute shares the GPU: the sum.
  EXPECT_EQ(pair_time({compute(300)}, {compute(500)}), 800);
  // Communication beside compute, no interference: the longer one.
  EXPECT_EQ(pair_time({tp(300)}, {compute(500)}), 500);
  // With slowdowns 1.5 (compute) and 2 (communication): compute at 2/3 rate, comm at half rate. The comm
  // of 300 ends at 600 having let compute do 400 of 500; the last 100 at full rate: 700.
  EXPECT_EQ(pair_time({tp(300)}, {compute(500)}, {1.5, 2.0}), 700);
  // Sequences: a 400 comm then 200 compute, beside 600 compute. Until 400: comm and compute overlap
  // (compute does 400); then compute beside compute at half rate: 200 left each, 400 more: 800.
  EXPECT_EQ(pair_time({tp(400), compute(200)}, {compute(600)}), 800);
  EXPECT_EQ(pair_time({}, {compute(200), tp(100)}), 300);
}

TEST(StrandPairing, HidesEachCommunicationUnderTheOtherStrandsCompute) {
  // forward: gather, gemm; backward: gemm, scatter. Best: gather beside the backward gemm, then the
  // forward gemm beside the scatter: 500 + 500 instead of 1,600 in a row.
  const std::vector<StrandOp> forward = {tp(300), compute(500)};
  const std::vector<StrandOp> backward = {compute(500), tp(300)};
  const StrandPairing pairing = pair_strands(forward, backward, {});
  EXPECT_EQ(pairing.serial_ns, 1600);
  EXPECT_EQ(pairing.estimated_ns, 1000);
  EXPECT_EQ(pairing.blocks, (std::vector<PairedBlock>{{0, 1, 0, 1}, {1, 2, 1, 2}}));
}

TEST(StrandPairing, NeverPairsTwoCommunicationsOfOneKind) {
  // Pairing the two gathers would cost the same in this model (each at half rate, 600 either way) but is
  // forbidden: they run one after the other (the backward first: ties keep the first plan found).
  // A context exchange may pair with a TP collective (ties keep the pair, found first).
  const StrandPairing same = pair_strands({tp(300)}, {tp(300)}, {});
  EXPECT_EQ(same.blocks, (std::vector<PairedBlock>{{0, 0, 0, 1}, {0, 1, 1, 1}}));
  EXPECT_EQ(same.estimated_ns, 600);
  const StrandPairing different = pair_strands({tp(300)}, {{300, Stream::cp_comm}}, {});
  EXPECT_EQ(different.blocks, (std::vector<PairedBlock>{{0, 1, 0, 1}}));
}

TEST(StrandPairing, SplitsAComputeRunToMatchTheCommunicationAround) {
  // forward: 400 compute, 400 compute, then a 400 scatter; backward: a 400 gather, then 400 compute.
  // Optimal: forward's first gemm beside the gather, its second gemm alone or shared, the scatter beside
  // the backward gemm: 400 + 400 + 400 = 1,200 (against 2,000 in a row).
  const std::vector<StrandOp> forward = {compute(400), compute(400), tp(400)};
  const std::vector<StrandOp> backward = {tp(400), compute(400)};
  const StrandPairing pairing = pair_strands(forward, backward, {});
  EXPECT_EQ(pairing.serial_ns, 2000);
  EXPECT_EQ(pairing.estimated_ns, 1200);
  int covered_forward = 0, covered_backward = 0;
  for (const PairedBlock& block : pairing.blocks) {
    EXPECT_EQ(block.forward_begin, covered_forward);
    EXPECT_EQ(block.backward_begin, covered_backward);
    covered_forward = block.forward_end;
    covered_backward = block.backward_end;
  }
  EXPECT_EQ(covered_forward, 3);
  EXPECT_EQ(covered_backward, 2);
}

}  // namespace
}  // namespace twin
