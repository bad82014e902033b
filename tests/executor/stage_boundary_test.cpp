// A stage boundary's transfers: every receiving GPU gets each of its rows exactly once, from a sender that holds
// them, and the senders' and receivers' lists pair up.
#include <gtest/gtest.h>

#include <vector>

#include "executor/stage_boundary.hpp"

namespace twin::exec {
namespace {

// Checks the boundary's transfers: each receiver's rows covered once, each send matched by the peer's receive.
void check_boundary(std::int64_t rows, const BoundarySides& sides) {
  const int gpus = sides.senders + sides.receivers;
  std::vector<std::vector<RowPiece>> pieces(gpus);
  for (int g = 0; g < gpus; ++g) pieces[g] = boundary_pieces(rows, sides, g);
  for (int r = 0; r < sides.receivers; ++r) {
    const std::int64_t held = sides.receivers_sharded ? rows / sides.receivers : rows;
    std::vector<int> covered(static_cast<std::size_t>(held), 0);
    for (const RowPiece& in : pieces[sides.senders + r]) {
      ASSERT_LT(in.peer, sides.senders);
      for (std::int64_t i = in.first_row; i < in.first_row + in.rows; ++i) ++covered.at(static_cast<std::size_t>(i));
      int matched = 0;  // the sender's piece to this receiver, of the same length
      for (const RowPiece& out : pieces[in.peer])
        if (out.peer == sides.senders + r && out.rows == in.rows) ++matched;
      EXPECT_EQ(matched, 1);
    }
    for (int c : covered) EXPECT_EQ(c, 1) << "receiver " << r;
  }
}

TEST(StageBoundary, AUniformPipelinesPairMovesItsRowsWhole) {
  EXPECT_EQ(boundary_pieces(512, {}, 0), (std::vector<RowPiece>{{1, 0, 512}}));
  EXPECT_EQ(boundary_pieces(512, {}, 1), (std::vector<RowPiece>{{0, 0, 512}}));
}

TEST(StageBoundary, SequenceParallelSharesMeetRowsHeldWhole) {
  // TP 2 under SP into TP 1: each sender its half; back: the TP-1 GPU sends each its half.
  EXPECT_EQ(boundary_pieces(1024, {2, 1, true, false}, 2), (std::vector<RowPiece>{{0, 0, 512}, {1, 512, 512}}));
  EXPECT_EQ(boundary_pieces(1024, {1, 2, false, true}, 0), (std::vector<RowPiece>{{1, 0, 512}, {2, 512, 512}}));
  for (const BoundarySides& sides : {BoundarySides{2, 1, true, false}, BoundarySides{1, 2, false, true},
                                     BoundarySides{2, 4, true, true}, BoundarySides{4, 2, true, true},
                                     BoundarySides{2, 1, false, false}, BoundarySides{1, 4, false, false},
                                     BoundarySides{4, 2, false, true}})
    check_boundary(1024, sides);
}

TEST(StageBoundary, UnshardedSendersServeReceiversInTurn) {
  // TP 2 without SP into TP 1: the first sender sends everything, the second nothing.
  EXPECT_EQ(boundary_pieces(256, {2, 1, false, false}, 0), (std::vector<RowPiece>{{2, 0, 256}}));
  EXPECT_TRUE(boundary_pieces(256, {2, 1, false, false}, 1).empty());
}

}  // namespace
}  // namespace twin::exec
