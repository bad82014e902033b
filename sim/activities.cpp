// Active lists are unordered vectors with swap-removal; each activity remembers its position in each.
#include "sim/activities.hpp"

#include <limits>

namespace twin::sim {

ActivityPool::ActivityPool(std::size_t classes) : active_(classes) {
  activities_.reserve(256);
  for (auto& list : active_) list.reserve(16);
}

std::uint32_t ActivityPool::acquire(ActivityKind kind, TimeNs now_ns) {
  std::uint32_t a;
  if (!free_.empty()) {
    a = free_.back();
    free_.pop_back();
  } else {
    a = static_cast<std::uint32_t>(activities_.size());
    activities_.emplace_back();
  }
  Activity& act = activities_[a];
  act.kind = kind;
  act.listed_in = {-1, -1};
  act.route.count = 0;
  act.updated_ns = now_ns;
  act.ns_per_unit = std::numeric_limits<double>::quiet_NaN();  // unequal to any rate: the first rating schedules it
  return a;
}

void ActivityPool::release(std::uint32_t a) {
  free_.push_back(a);
}

void ActivityPool::list(std::uint32_t a, int rank_class) {
  Activity& act = activities_[a];
  const int slot = act.listed_in[0] < 0 ? 0 : 1;
  act.listed_in[slot] = rank_class;
  act.list_position[slot] = static_cast<std::uint32_t>(active_[rank_class].size());
  active_[rank_class].push_back(a);
}

void ActivityPool::unlist(std::uint32_t a) {
  for (int slot = 0; slot < 2; ++slot) {
    const int rank_class = activities_[a].listed_in[slot];
    if (rank_class < 0) continue;
    std::vector<std::uint32_t>& list = active_[rank_class];
    const std::uint32_t position = activities_[a].list_position[slot];
    const std::uint32_t moved = list.back();
    list[position] = moved;
    list.pop_back();
    if (moved != a) {
      Activity& other = activities_[moved];
      other.list_position[other.listed_in[0] == rank_class ? 0 : 1] = position;
    }
  }
  activities_[a].listed_in = {-1, -1};
}

}  // namespace twin::sim
