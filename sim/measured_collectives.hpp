// Collectives a calibrated profile measured, as plans for the fluid engine. A table (its GPU, kind and
// exact placement) gives the isolated time T(S) of a message of S bytes; the plan splits T into the
// table's fitted latency (steps x per-step latency, at most T) and one flow over the links the group
// spans whose bytes take the rest of T at those links' capacity for S. Alone it takes exactly T; shared
// with other flows it slows as any flow does. Placements the profile did not measure keep the algorithm
// models of sim/collectives.hpp.
#pragma once
#include <string_view>

#include "cost/profile.hpp"
#include "core/op_graph.hpp"
#include "sim/collectives.hpp"

namespace twin::sim {

// The plan of `table` (found for the op's kind and span) for a message of `bytes` (nccl-tests' S) on
// GPUs with `links`; algorithm "measured". Zero bytes: a plan with no phases.
CollectivePlan measured_collective_plan(const CollectiveTable& table, Bytes bytes, const LinkParams& links);

// An all-to-all sent in `blocks_per_peer` blocks per peer (Op::blocks_per_peer) over the placement of `one_block`,
// the profile's table of one block: its time at S read from the profile's tables of that placement in blocks,
// log-linear in the blocks between the two measured around it (one block: `one_block`), and beyond the most
// measured linear in the blocks through the last two (each block's send and receive cost NCCL a step of its own);
// split into latency and flow as measured_collective_plan does. Without tables in blocks: `one_block`'s plan.
CollectivePlan measured_blocks_plan(const Profile& profile, const CollectiveTable& one_block, int blocks_per_peer,
                                    Bytes bytes, const LinkParams& links);

// The profile's table for a collective of `kind` over `span` on GPUs named `gpu`; nullptr when not measured.
const CollectiveTable* measured_collective(const Profile& profile, std::string_view gpu, OpKind kind,
                                           const GroupSpan& span);
// The profile's send/recv table that stands for a point-to-point transfer on `link`: two ranks on one
// node (intra) or on two nodes (inter); nullptr when not measured.
const CollectiveTable* measured_point_to_point(const Profile& profile, std::string_view gpu, LinkKind link);

}  // namespace twin::sim
