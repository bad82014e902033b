// How much a collective moves and in how many steps, as nccl-tests counts them (conventions.md): the bus
// bandwidth factor that turns a collective's buffer bytes S into the bytes one GPU puts on its link, and the
// steps of NCCL's ring algorithm, each of which pays the link's latency once.
#pragma once
#include "core/op.hpp"

namespace twin {

// nccl-tests' bus bandwidth factor and ring algorithm steps for a collective of `ranks` ranks.
// `collective` is all_reduce, all_gather, reduce_scatter, all_to_all or send/recv; anything else throws
// std::invalid_argument.
double busbw_factor(OpKind collective, int ranks);
int algorithm_steps(OpKind collective, int ranks);

}  // namespace twin
