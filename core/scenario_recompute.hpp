// strategy.recompute_modules (Megatron's --recompute-modules): read, and checked against the model and framework as
// Megatron's TransformerConfig.__post_init__ checks them (transformer_config.py:1943 at NVIDIA/Megatron-LM d98e8a64dd),
// and where a module would repeat nothing in this model.
#pragma once
#include <vector>

#include "core/json_reader.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"

namespace twin {

// The list at `r`: Megatron's names, each once, at least one; only beside `recompute` "selective" (`granularity`).
std::vector<RecomputeModule> parse_recompute_modules(const JsonReader& r, Recompute granularity);

// Throws at `modules` (the list's reader) for a module the scenario's model or framework cannot recompute.
void check_recompute_modules(const JsonReader& modules, const std::vector<RecomputeModule>& stated,
                             const Scenario& scenario);

}  // namespace twin
