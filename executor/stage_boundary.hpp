// What a stage boundary moves between the GPUs of its two sides: a micro-batch's activation forward, its
// gradient backward, `rows` rows (tokens) wide. A side holds all rows on each GPU, or under sequence parallelism
// its GPUs' consecutive shares (GPU i of n: rows [i rows / n, (i + 1) rows / n)). Each receiving GPU gets the rows
// it holds from the sending GPUs that hold them: from each sender whose share overlaps its own when the senders
// shard the rows, else all from sender (its place mod the senders). A uniform pipeline's boundary is the case of
// one GPU on each side holding its own rows; an asymmetric plan's stages differ in TP size.
#pragma once
#include <cstdint>
#include <vector>

namespace twin::exec {

// The two sides of a boundary as its communicator orders them: the `senders` first, then the `receivers`.
struct BoundarySides {
  int senders = 1, receivers = 1;
  bool senders_sharded = false, receivers_sharded = false;
};

// One transfer of a GPU at the boundary: its peer's place in the boundary's communicator and the rows of this
// GPU's own buffer it sends or receives [first_row, first_row + rows).
struct RowPiece {
  int peer = 0;
  std::int64_t first_row = 0, rows = 0;
  bool operator==(const RowPiece&) const = default;
};

// The transfers of the GPU at `position` (a sender below sides.senders, else a receiver), in peer order.
std::vector<RowPiece> boundary_pieces(std::int64_t rows, const BoundarySides& sides, int position);

}  // namespace twin::exec
