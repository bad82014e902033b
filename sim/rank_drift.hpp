// Ranks that drift apart and wait for the last at a collective. The simulator replays one representative rank
// per class, so every rank of a group would reach its collectives together; real ranks do not. After the moment
// their compute was last aligned, rank r of a group arrives after T (1 + rate z_r) + fixed_ns y_r of compute, T
// the representative rank's compute since that moment and z_r, y_r independent standard normals: `rate` is the
// spread of the GPUs' speeds (clock at the power limit, GPU-to-GPU variation), `fixed_ns` launch and host jitter.
// The collective starts when the last of the n ranks arrives, which is expected
//     e_n (fixed_ns + rate T)   after the representative (mean) rank,  e_n = E[max of n standard normals]
// (the two spreads added, not in quadrature: the form the measurement was fitted in, tests/gpu/nccl_drift_fit.py).
// e_1 = 0, e_2 = 0.564, e_4 = 1.029, e_8 = 1.424, e_64 = 2.410, e_1024 = 3.241: the wait grows with the group
// and with the compute between alignments.
// Where compute is aligned: a collective whose result the compute waits on (a compute op is its successor in the
// graph) leaves the ranks of its group together, so it resets T for its group kind; a collective on a side stream
// (gradient reductions beside the backward) waits for the last rank but aligns nothing. Each group kind is
// aligned only by its own collectives and by the iteration's start (the optimizer waited for every rank).
#pragma once
#include <array>
#include <cstdint>

#include "core/op_graph.hpp"
#include "core/units.hpp"
#include "cost/rank_drift.hpp"
#include "sim/flat_graph.hpp"

namespace twin::sim {

// E[max of `ranks` independent standard normals]: 0 for one rank; numerical integration, within 1e-6.
double expected_max_of_normals(int ranks);

// The expected wait of a collective for the last of its ranks, `max_of_n` = e_n of their number and T = `drift_ns`
// of compute since its group was last aligned: e_n (fixed_ns + rate T), rounded up to a ns.
TimeNs expected_lateness_ns(const RankDrift& drift, double max_of_n, TimeNs drift_ns);

// The wait of collective `op` of `flat` when its class has done `compute_ns` of compute (its breakdown's), its
// groups last aligned at `aligned_ns` (per group kind, updated: a collective a compute op waits on aligns its
// group). 0 with the drift off, for a group of one and for ops that are not collectives of a group.
TimeNs collective_arrival_wait_ns(const FlatClass& flat, std::uint32_t op, TimeNs compute_ns,
                                  std::array<TimeNs, kGroupKindCount>& aligned_ns);

}  // namespace twin::sim
