// The engine's running activities (a compute op, a step latency, a flow) in a pool reused through a
// free list, so the event loop stops allocating once warm. Compute and flow activities are listed
// under the rank classes whose state sets their rate, for re-rating when that state changes.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/units.hpp"
#include "sim/links.hpp"

namespace twin::sim {

enum class ActivityKind : std::uint8_t { compute, delay, flow };

struct Activity {
  ActivityKind kind = ActivityKind::compute;
  std::int32_t rank_class = -1;                  // compute: its class
  std::uint32_t target = 0;                      // compute: op index; delay, flow: communication run
  std::array<std::int32_t, 2> listed_in{-1, -1};  // classes whose active list holds it
  std::array<std::uint32_t, 2> list_position{};
  double remaining = 0;                          // compute: nominal ns; flow: bytes
  double ns_per_unit = 0;                        // NaN until first rated
  TimeNs updated_ns = 0;                         // when `remaining` was last brought up to date
  FlowRoute route;                               // flow only
};

class ActivityPool {
 public:
  explicit ActivityPool(std::size_t classes);
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

}  // namespace twin::sim
