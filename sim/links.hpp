// Fluid bandwidth sharing (SimGrid's flow-level idea, with equal shares instead of max-min). Every GPU
// of a rank class has an intra-node and an inter-node link, each full duplex: a transmit and a receive
// resource. A flow occupies some of these resources (a collective both directions of the links it
// uses, a pipeline send the sender's transmit and the receiver's receive side); the flows on one
// resource share its capacity equally, and a flow moves at the smallest share among its resources.
// Defined inline here: the engine's event loop calls these at every flow's start, end and rating.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "sim/collectives.hpp"

namespace twin::sim {

enum class Direction : std::uint8_t { transmit, receive };
inline constexpr int kResourcesPerClass = 2 * kLinkKindCount;
inline constexpr int resource_index(int link, Direction direction) {
  return 2 * link + (direction == Direction::transmit ? 0 : 1);
}

// One resource a flow occupies, with the capacity it would have alone (bandwidth x efficiency at the
// flow's message size, in bytes/ns).
struct FlowResource {
  std::int32_t rank_class = 0;
  std::uint8_t resource = 0;
  double capacity_GBps = 0;
};

struct FlowRoute {
  std::array<FlowResource, 4> resources{};
  int count = 0;
  void add(std::int32_t rank_class, int link, Direction direction, double capacity_GBps) {
    resources[count++] = {rank_class, static_cast<std::uint8_t>(resource_index(link, direction)), capacity_GBps};
  }
};

// How many flows are active on each resource of each class.
class LinkLoads {
 public:
  explicit LinkLoads(std::size_t classes) : flows_(classes) {}
  void attach(const FlowRoute& route);
  void detach(const FlowRoute& route);
  int flows_on(std::int32_t rank_class, int resource) const { return flows_[rank_class][resource]; }
  // Nanoseconds per byte of a flow on `route` given the current loads (the inverse of its rate).
  double ns_per_byte(const FlowRoute& route) const;

 private:
  std::vector<std::array<int, kResourcesPerClass>> flows_;
};

// Equal shares: rate = capacity / flows on the resource; the slowest resource bounds the flow.
inline void LinkLoads::attach(const FlowRoute& route) {
  for (int i = 0; i < route.count; ++i) ++flows_[route.resources[i].rank_class][route.resources[i].resource];
}

inline void LinkLoads::detach(const FlowRoute& route) {
  for (int i = 0; i < route.count; ++i) --flows_[route.resources[i].rank_class][route.resources[i].resource];
}

inline double LinkLoads::ns_per_byte(const FlowRoute& route) const {
  double slowest = 0;
  for (int i = 0; i < route.count; ++i) {
    const FlowResource& r = route.resources[i];
    slowest = std::max(slowest, flows_[r.rank_class][r.resource] / r.capacity_GBps);
  }
  return slowest;
}

}  // namespace twin::sim
