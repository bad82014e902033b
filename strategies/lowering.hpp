// Lowering: a model, a training setup and a strategy become one op graph per pipeline stage, in the
// vocabulary of core/op.hpp, with the streams, dependencies and collectives that Megatron-LM would issue.
#pragma once
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"

namespace twin {

// `strategy` must be complete (dp and num_micro_batches derived) and valid (see validity.hpp).
IterationGraph lower_to_op_graphs(const Scenario& scenario, const Strategy& strategy);

}  // namespace twin
