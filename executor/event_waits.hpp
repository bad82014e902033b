// Which ops each op of a rank class waits for on other streams, as the executor issues them: every dependency of
// the graph between two streams (an event wait), and one the executor adds: a pipeline receive waits for the
// compute op issued before it. Pure CPU: executor/gpu/stage_runtime.cpp records and waits on the events.
#pragma once
#include <vector>

#include "core/op_graph.hpp"

namespace twin::exec {

// Per op, in op order, the ops on other streams it waits for. The graph lets a receive start as early as its
// stream allows; posted that early, its NCCL kernel sits on the GPU through the passes before, waiting for its
// data, and slows the GEMMs beside it, most likely by holding SMs (measured on two H200s, 2026-11-27: 1F1B over
// two stages ran 11% slower, GEMMs with a [tokens, hidden] output 20-40% slower than priced). Posted after the
// compute before it, it waits only where the schedule needs its data, as Megatron's schedule posts it.
std::vector<std::vector<OpIndex>> event_waits(const RankClass& rank_class);

}  // namespace twin::exec
