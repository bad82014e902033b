// Waiting on the GPU without hanging forever: NCCL reports errors asynchronously and a dead or diverged
// peer makes collectives wait forever, so every wait polls its event, checks the communicators' async
// errors and gives up after a timeout, aborting the communicators so that nothing stays blocked.
#pragma once
#include <functional>
#include <string>

#include <cuda_runtime.h>

#include "executor/communicators.hpp"

namespace twin::exec {

// Returns when `event` has completed. Throws std::runtime_error naming `where()` (evaluated only on
// failure: the rank and the op that did not finish) on a NCCL async error or after `timeout_s`.
void wait_watching_nccl(cudaEvent_t event, Communicators& comms, double timeout_s,
                        const std::function<std::string()>& where);

// Test hook: TWIN_FAULT_INJECT="hang:RANK:ITERATION" makes that rank stop issuing work at its first
// collective of that iteration and sleep (a stuck peer); "oom:RANK:ITERATION" makes its first activation
// allocation of that iteration ask for 16 TiB (a real out-of-memory). Unset: no fault.
struct InjectedFault {
  enum Kind { none, hang, out_of_memory } kind = none;
  int rank = -1, iteration = -1;
  bool hits(int rank_, int iteration_) const { return kind != none && rank == rank_ && iteration == iteration_; }
};
InjectedFault injected_fault_from_environment();

}  // namespace twin::exec
