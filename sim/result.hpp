// What one simulated iteration produces: its time and breakdown, and (on request) every op's start/end.
#pragma once
#include <cstdint>
#include <vector>

#include "core/op_graph.hpp"
#include "core/units.hpp"

namespace twin {

// The iteration of the critical (slowest) rank class, split so that the parts add up to the total:
// compute: compute stream busy on forward/backward work; optimizer: optimizer-phase work (its
// collectives included); exposed_communication: a communication stream busy while compute idles;
// bubble: nothing running (waiting on other pipeline stages).
struct TimeBreakdown {
  TimeNs compute_ns = 0;
  TimeNs exposed_communication_ns = 0;
  TimeNs bubble_ns = 0;
  TimeNs optimizer_ns = 0;
  TimeNs total_ns() const { return compute_ns + exposed_communication_ns + bubble_ns + optimizer_ns; }
};

struct OpTiming {
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
};

struct ClassResult {
  TimeNs finish_ns = 0;                  // when this class's last op ended
  TimeBreakdown breakdown;
  TimeNs communication_busy_ns = 0;      // union of all communication streams busy
  std::vector<OpTiming> op_timings;      // indexed by OpIndex; empty unless recorded
};

// An iteration extrapolated from two shorter replays of its pipeline's steady state (strategies/steady_state.hpp):
// the micro-batch counts replayed. Zeros for an iteration replayed whole.
struct SteadyStateReplay {
  int first_micro_batches = 0;
  int second_micro_batches = 0;
  bool extrapolated() const { return second_micro_batches > 0; }
  bool operator==(const SteadyStateReplay&) const = default;
};

struct IterationResult {
  TimeNs iteration_ns = 0;               // max over classes of finish_ns
  int critical_class = 0;
  TimeBreakdown breakdown;               // of the critical class
  std::vector<ClassResult> classes;
  std::uint64_t events = 0;              // events the engine processed
  SteadyStateReplay steady_state;        // set when extrapolated rather than replayed whole
};

}  // namespace twin
