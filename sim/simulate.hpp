// Replays an iteration's op graphs in simulated time: streams per GPU, collectives over the cluster's
// links as fluid flows that share bandwidth, overlap interference from the profile.
#pragma once
#include "cost/profile.hpp"
#include "core/cluster.hpp"
#include "core/op_graph.hpp"
#include "sim/result.hpp"

namespace twin {

namespace sim {
class PriceCache;
}

struct SimOptions {
  bool record_op_timings = false;   // fill ClassResult::op_timings (for traces and best.json)
  // Compute-op prices shared with other simulations on the same profile and cluster (a search's), or none.
  sim::PriceCache* prices = nullptr;
};

// Deterministic: the same inputs give the same result, bit for bit.
IterationResult simulate_iteration(const IterationGraph& graph, const Cluster& cluster, const Profile& profile,
                                   const SimOptions& options = {});

}  // namespace twin
