// Host time (Op::host_ns): a rank class's host (its launch thread) works for an op after the op's dependencies have
// finished and before it can start, with the GPU waiting. The host works on one such op at a time, and an op of the
// class that becomes ready while the host works starts when it is done (the host issues nothing meanwhile). Ops
// released by one event are admitted together after it, those with host time first (the framework loops before it
// launches what the same synchronisation released). A class with no host time starts each op the moment it is
// ready; host waits count as idle in the breakdown.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/flat_graph.hpp"

namespace twin::sim {

// When an op made ready by an event may start.
struct Admission {
  int rank_class = 0;
  std::uint32_t op = 0;
  TimeNs start_ns = 0;  // at or after the event's time
};

class HostTimeline {
 public:
  explicit HostTimeline(const FlatIteration& flat);

  // Whether op `op` of class `c`, now ready, must wait for admission (its class has host time), queuing it if so.
  bool defer(int c, std::uint32_t op);
  // The ops deferred since the last call, in the order they start, each with the time it may start: the host
  // works on the ops with host time first, one after another from when it is free. Valid until the next call.
  const std::vector<Admission>& admit(TimeNs now_ns);

 private:
  const FlatIteration& flat_;
  std::vector<TimeNs> host_free_ns_;  // per class: when its host has done the host work given it so far
  std::vector<Admission> ready_;      // deferred since the last admit
  std::vector<Admission> admitted_;
};

}  // namespace twin::sim
