// Context parallelism's ring exchange, step by step: what exchange `step` of one layer's ring carries, the one
// description the lowering prices (strategies/lowering_layer.cpp) and the executor sends
// (executor/gpu/context_ring_run.hpp).
// Forward, exchange k passes the key-value block of step k on (k <= cp - 2). Backward, exchange k also carries
// the key-value gradient of step k - 1's block (k >= 1), and exchange cp only that gradient, home. Pure CPU.
#pragma once
#include <cstdint>

namespace twin {

struct RingPayload {
  bool key_values = false;  // the step's packed K | V block, onward to the next CP rank
  bool gradient = false;    // the dK | dV accumulated for step - 1's block
  // Packed blocks sent (and received) by each rank: bf16 tokens x (K | V), one per part carried.
  int blocks() const { return int(key_values) + int(gradient); }
};

// Exchange `step` (0 .. cp - 2 forward, 0 .. cp backward) of a ring of `cp` ranks.
RingPayload ring_payload(int cp, int step, bool backward);

}  // namespace twin
