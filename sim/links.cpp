// Equal shares: rate = capacity / flows on the resource; the slowest resource bounds the flow.
#include "sim/links.hpp"

#include <algorithm>

namespace twin::sim {

void LinkLoads::attach(const FlowRoute& route) {
  for (int i = 0; i < route.count; ++i) ++flows_[route.resources[i].rank_class][route.resources[i].resource];
}

void LinkLoads::detach(const FlowRoute& route) {
  for (int i = 0; i < route.count; ++i) --flows_[route.resources[i].rank_class][route.resources[i].resource];
}

double LinkLoads::ns_per_byte(const FlowRoute& route) const {
  double slowest = 0;
  for (int i = 0; i < route.count; ++i) {
    const FlowResource& r = route.resources[i];
    slowest = std::max(slowest, flows_[r.rank_class][r.resource] / r.capacity_GBps);
  }
  return slowest;
}

}  // namespace twin::sim
