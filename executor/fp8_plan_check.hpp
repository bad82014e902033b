// What twin execute runs of training.fp8 (core/fp8.hpp), checked before anything is lowered: FP8 linears with
// one scale per tensor (recipes tensorwise and delayed) or per block (blockwise, in E4M3) on GPUs with FP8 tensor
// cores, in a dense model whose linears are whole on each GPU. Everything else the scenario can say about FP8 is priced by the simulator only, and refused
// here at its own key with the reason. Pure CPU code.
#pragma once
#include <string>

#include "core/plan_file.hpp"

namespace twin::exec {

// Throws InputError (file, JSON path, expectation) for an FP8 plan twin execute does not run; nothing without fp8.
void check_fp8_plan(const Plan& plan, const std::string& file);

}  // namespace twin::exec
