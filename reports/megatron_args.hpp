// megatron_args.txt: the winning plan as the command-line arguments of Megatron-LM's pretrain_gpt.py, so
// that a user can run what twin chose. One argument (with its value) per line; lines starting with '#' are
// comments: what the file describes, what Megatron derives itself (data-parallel size, vocabulary), and
// every part of the plan that Megatron-LM cannot express (ZeRO 2/3, the GPipe and double-strand schedules,
// the hot-switch, per-layer and heterogeneous families). docs/BRIDGES.md lists the mapping.
#pragma once
#include <string>

#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "strategies/search.hpp"

namespace twin {

// The arguments of one uniform strategy (a complete one: data_parallel_size derived), deterministic.
// What Megatron cannot express is left out and named on a '#' line; everything else is given explicitly,
// Megatron's defaults included where they differ from twin's (dropout, normalization, position embedding).
std::string megatron_args(const Scenario& scenario, const Strategy& strategy);

// The candidate's arguments: megatron_args of its strategy for a uniform candidate; for a family plan
// (hot-switch, per-layer, heterogeneous), which no single Megatron-LM launch runs, only '#' lines saying so.
std::string megatron_args(const Scenario& scenario, const Candidate& candidate);

}  // namespace twin
