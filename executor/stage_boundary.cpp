#include "executor/stage_boundary.hpp"

#include <algorithm>
#include <stdexcept>

namespace twin::exec {
namespace {

struct Rows {
  std::int64_t begin = 0, end = 0;
};

Rows held(std::int64_t rows, int gpus, bool sharded, int index) {
  if (!sharded) return {0, rows};
  if (rows % gpus != 0) throw std::invalid_argument("a stage boundary's rows do not split over its GPUs");
  return {index * rows / gpus, (index + 1) * rows / gpus};
}

}  // namespace

std::vector<RowPiece> boundary_pieces(std::int64_t rows, const BoundarySides& sides, int position) {
  const bool sending = position < sides.senders;
  std::vector<RowPiece> out;
  for (int receiver = 0; receiver < sides.receivers; ++receiver) {
    const Rows need = held(rows, sides.receivers, sides.receivers_sharded, receiver);
    for (int sender = 0; sender < sides.senders; ++sender) {
      if (!sides.senders_sharded && sender != receiver % sides.senders) continue;
      const Rows has = held(rows, sides.senders, sides.senders_sharded, sender);
      const Rows moved{std::max(need.begin, has.begin), std::min(need.end, has.end)};
      if (moved.end <= moved.begin) continue;
      if (sending && sender == position)
        out.push_back({sides.senders + receiver, moved.begin - has.begin, moved.end - moved.begin});
      if (!sending && receiver == position - sides.senders)
        out.push_back({sender, moved.begin - need.begin, moved.end - moved.begin});
    }
  }
  return out;
}

}  // namespace twin::exec
