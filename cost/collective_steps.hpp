// How much a collective moves and in how many steps, as nccl-tests counts them (conventions.md) and NCCL's
// ring runs them: the steps of the algorithm, each of which pays the link's latency once, and the bus
// bandwidth factor that turns a collective's buffer bytes S into the bytes one GPU puts on its link. The one
// home of both: calibration fits, measured-table pricing and the simulator's NCCL model (sim/) use these.
#pragma once
#include "core/op.hpp"

namespace twin {

// Steps of a collective of `ranks` ranks around NCCL's ring: all_reduce 2 (n-1) (a reduce-scatter, then an
// all-gather), all_gather, reduce_scatter and the direct all_to_all n-1, each moving S/n per rank; send/recv
// one step of all of S. `collective` is one of those; anything else throws std::invalid_argument.
int algorithm_steps(OpKind collective, int ranks);
// nccl-tests' bus bandwidth factor: the steps times the share of S each moves (2 (n-1)/n for all_reduce,
// (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for send/recv). Throws as algorithm_steps.
double busbw_factor(OpKind collective, int ranks);

}  // namespace twin
