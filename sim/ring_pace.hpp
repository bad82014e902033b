// How fast a ring across nodes can step, measured: a ring collective over k > 1 nodes takes at least its steps x
// step_us(k), with step_us(k) = 5.23 us + 0.705 us x log2(k / 2). NCCL's own model prices a ring's latency as the
// sum of a latency per hop (sim/nccl_model.hpp: 1.9 us an NVLink hop and 4 us a network hop for LL128) and adds the
// bytes' time; measured rings across many nodes are slower than that when latency-bound and no slower when
// bandwidth-bound: each of the ring's n - 1 (2 (n - 1) for all-reduce) steps waits for the data of the step before
// it to cross its slowest hop, and the more nodes a ring spans the more network hops each step waits on. The ring
// then takes the larger of its steps' pace and NCCL's latency-plus-bytes time (the bandwidth part overlaps the
// steps' latency in NCCL's pipelined ring).
//   Fitted (two points, one per source; docs/VALIDATION.md "Rings across nodes"): 2 nodes, nccl-tests #309 (16 H100s,
//   NCCL_ALGO=Ring, 1 MiB all-reduce in 156.9 us over 30 steps: 5.23 us a step) and 128 nodes, nccl-tests #322
//   (1,024 H100s, 1 GiB all-reduce in 19,355 us over 2,046 steps: 9.46 us a step). Held out: every other nccl-tests
//   point of docs/validation/nccl_published.json and the published training table.
// Rings inside one node are NCCL's model alone (the measured nodes agree with it: docs/VALIDATION.md "The network").
#pragma once
#include "core/op.hpp"
#include "core/op_graph.hpp"

namespace twin::sim {

// The least time, in ns, of a ring `kind` over `span` (0 inside one node).
double ring_pace_floor_ns(OpKind kind, const GroupSpan& span);

}  // namespace twin::sim
