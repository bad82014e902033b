// The engine's running activities (a compute op, a step latency, a flow, a wait for the host) in a pool reused through a
// free list, so the event loop stops allocating once warm. Compute and flow activities are listed
// under the rank classes whose state sets their rate, for re-rating when that state changes. The pool's
// operations are defined inline here: the engine's event loop calls them at every event.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/units.hpp"
#include "sim/links.hpp"

namespace twin::sim {

// host: an op whose dependencies have finished, waiting for its class's host (its own host time, or another op's
// that the host works on: sim/engine.hpp).
enum class ActivityKind : std::uint8_t { compute, delay, flow, host, issue };

struct Activity {
  ActivityKind kind = ActivityKind::compute;
  std::int32_t rank_class = -1;                  // compute, host: its class
  std::uint32_t target = 0;                      // compute, host: op index; delay, flow: communication run
  std::array<std::int32_t, 2> listed_in{-1, -1};  // classes whose active list holds it
  std::array<std::uint32_t, 2> list_position{};
  double remaining = 0;                          // compute: nominal ns; flow: bytes
  double ns_per_unit = 0;                        // NaN until first rated
  TimeNs updated_ns = 0;                         // when `remaining` was last brought up to date
  FlowRoute route;                               // flow only
};

class ActivityPool {
 public:
  explicit ActivityPool(std::size_t classes) : active_(classes) {
    activities_.reserve(256);
    for (auto& list : active_) list.reserve(16);
  }
  // A fresh activity of `kind`, unlisted and unrated, up to date at `now_ns`.
  std::uint32_t acquire(ActivityKind kind, TimeNs now_ns);
  // Recycles it. Unlist it first, and release it only once its completion has popped.
  void release(std::uint32_t a);
  void list(std::uint32_t a, int rank_class);
  void unlist(std::uint32_t a);
  Activity& operator[](std::uint32_t a) { return activities_[a]; }
  const Activity& operator[](std::uint32_t a) const { return activities_[a]; }
  const std::vector<std::uint32_t>& active(int rank_class) const { return active_[rank_class]; }

 private:
  std::vector<Activity> activities_;
  std::vector<std::uint32_t> free_;
  std::vector<std::vector<std::uint32_t>> active_;
};

// Active lists are unordered vectors with swap-removal; each activity remembers its position in each.
inline std::uint32_t ActivityPool::acquire(ActivityKind kind, TimeNs now_ns) {
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

inline void ActivityPool::release(std::uint32_t a) {
  free_.push_back(a);
}

inline void ActivityPool::list(std::uint32_t a, int rank_class) {
  Activity& act = activities_[a];
  const int slot = act.listed_in[0] < 0 ? 0 : 1;
  act.listed_in[slot] = rank_class;
  act.list_position[slot] = static_cast<std::uint32_t>(active_[rank_class].size());
  active_[rank_class].push_back(a);
}

inline void ActivityPool::unlist(std::uint32_t a) {
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
