// The discrete-event loop over a flattened iteration. An op starts when the previous op of its stream
// and all its dependencies have finished; compute runs for its nominal time, communication runs its
// plan's phases (step latency, then fluid flows on the class's links); a pipeline send and its recv
// start together when both are ready and end together. Whenever what a class is running changes, every
// activity whose rate depends on it is brought up to date and its completion rescheduled:
//   compute rate   1/slowdown while communication of its class is in progress, else 1: beside NCCL kernels the
//                  profile's compute slowdown for the op's band and each NCCL op's row (sim/interference_grid.hpp:
//                  measured per collective kind and size and per compute class and size, else the scalar
//                  overlap.compute_slowdown), sm_count / (sm_count - 16) beside a userbuffers kernel on 16 SMs,
//                  none beside copy-engine copies (the largest that applies); divided by the number of compute ops
//                  of its class in progress (two compute streams share the SMs: co-running two kernels takes as
//                  long as running them one after another);
//   flow rate      its smallest link share (links.hpp), / the communication slowdown of its op's row beside the
//                  compute running in a class it belongs to (the largest over those ops' bands) when NCCL moves
//                  it (userbuffers run on SMs of their own or the copy engines).
// An op with host time (Op::host_ns) waits for its class's host first (sim/host_timeline.hpp).
// An op with dispatch time (Op::dispatch_ns) is ready no earlier than its class's host has issued it: the host
// issues the class's ops in order, each after the dispatch times of those before it and its own, without waiting
// for the GPU (FlatClass::issue_at_ns).
// Completions are integer nanoseconds (now + ceil(remaining / rate)); equal times run in the order they
// were scheduled. Ops of zero duration still complete through the queue, never recursively.
#pragma once
#include "core/op_graph.hpp"
#include "sim/flat_graph.hpp"
#include "sim/horizon.hpp"
#include "sim/result.hpp"
#include "sim/simulate.hpp"

namespace twin::sim {

// `graph` is the one `flat` was built from (used to name ops in errors; where it holds only some classes' ops, as
// lowered class by class, the others' are named by id alone). Throws std::logic_error naming a
// stuck op of each class when nothing can run while ops remain (a deadlock: a lowering bug).
IterationResult run_engine(const FlatIteration& flat, const IterationGraph& graph, const SimOptions& options);

}  // namespace twin::sim
