// What `twin execute` refuses before launching anything, with no GPU needed: plans that do not fit the
// GPUs' memory, and models, strategies or framework switches the executor does not run.
#pragma once
#include <string>

#include "core/plan_file.hpp"

namespace twin::exec {

// Throws InputError naming `file` (the plan's path), the JSON path at fault and why; returns for a plan
// twin execute runs.
void check_executable_plan(const Plan& plan, const std::string& file);

}  // namespace twin::exec
