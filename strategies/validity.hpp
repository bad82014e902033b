// Validity rules of a strategy for a model and cluster, each explained in words a user understands.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/scenario.hpp"
#include "core/strategy.hpp"

namespace twin {

// Derives data_parallel_size (world / (tp*pp*cp)) and num_micro_batches (global / (mbs*dp)) and
// normalises sequence_parallel (off when tp == 1). Returns the reason when they cannot be derived.
std::optional<std::string> complete_strategy(const Scenario& scenario, Strategy& strategy);

// Every rule: divisibility of heads, query groups, layers, experts, batch, sequence (CP), vocabulary;
// world size; schedule constraints. nullopt when valid, else the first broken rule, e.g.
// "num_attention_heads 32 not divisible by tensor_model_parallel_size 3".
std::optional<std::string> invalid_reason(const Scenario& scenario, const Strategy& strategy);

// About how many ops lower_to_op_graphs makes for a complete strategy (within about 2x, from its micro-batches,
// layers and what splits ops), computed without lowering. A strategy is invalid when the largest graph the search
// replays at once exceeds kMaxOpsPerCandidate (the whole iteration's, or where the steady-state extrapolation stands
// for it, strategies/steady_state.hpp, its longer replay's): it would take gigabytes (about 0.5 KB per op
// simulated, more with traces).
inline constexpr std::int64_t kMaxOpsPerCandidate = 8000000;
std::int64_t estimated_op_count(const Scenario& scenario, const Strategy& strategy);
// Why the whole iteration's graph of a valid strategy cannot be held (a whole replay, op timings, traces, a plan
// file), naming its size; nullopt when it can. Only a strategy that the steady state stands for gets past the limit.
std::optional<std::string> whole_graph_too_large(const Scenario& scenario, const Strategy& strategy);
// The reason a graph of about estimated_op_count ops is refused (its size, the limit and how to narrow it), or
// nullopt within kMaxOpsPerCandidate. The plan families bound their plans by it too, each with a Strategy of the
// plan's micro-batches (all pipelines') and splits, before lowering or pricing anything of the plan.
std::optional<std::string> too_many_ops_reason(const Scenario& scenario, const Strategy& strategy);

}  // namespace twin
