// A scenario's training.fp8 checked against the rest of the scenario (core/fp8.hpp reads the section itself).
#pragma once
#include "core/json_reader.hpp"
#include "core/scenario.hpp"

namespace twin {

// FP8 tensor cores on every GPU of the cluster, MXFP8 Blackwell's, the BF16 edge layers within the model, no plan
// family (their lowering and memory model price 16-bit linears only). `root` reads the scenario's document.
void check_fp8_scenario(const Scenario& scenario, const JsonReader& root);

}  // namespace twin
