// What twin execute runs of activation recompute: which selective-recompute modules it repeats, and where it stops a
// full recompute early as PyTorch's non-reentrant checkpoint does (framework.checkpoint_early_stop,
// core/framework.hpp recompute_stops_early). Pure CPU code.
#pragma once
#include <string>

#include "core/plan_file.hpp"
#include "strategies/families/plan_graphs.hpp"

namespace twin::exec {

// Throws InputError at `at`/recompute_modules for selective-recompute modules twin execute does not repeat under
// `s`: core attention everywhere; a dense layer's `layernorm` and `mlp` at TP 1, without FP8 or residual fusion.
void check_recompute_modules(const Scenario& scenario, const Strategy& s, const std::string& file,
                             const std::string& at);

// Throws InputError at /scenario/framework/checkpoint_early_stop for an early-stopping recompute twin execute has
// not run on a GPU: one whose repeated forward holds a collective (TP, CP or EP exchanges), or one in FP8 linears.
void check_early_stop(const Plan& plan, const PlanGraphs& lowered, const std::string& file);

}  // namespace twin::exec
