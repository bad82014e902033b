// Lowering: a model, a training setup and a strategy become one op graph per pipeline stage, in the
// vocabulary of core/op.hpp, with the streams, dependencies and collectives that Megatron-LM would issue
// (or, for the double-strand schedule, DHeLlam's two strands with their paired segments).
#pragma once
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "cost/profile.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "core/units.hpp"

namespace twin {

// What the double-strand pairing chose for one kind of unit pair on the first stage, for reports.
struct StrandPairingSummary {
  std::string forward_unit;            // "layer", "MoE layer", "embedding", "output layer"
  std::string backward_unit;
  std::vector<std::string> blocks;     // in order: "tp_gather.fwd ‖ fc2.bwd + fc2.bwd", "norm.fwd ‖ –"
  int paired_blocks = 0;               // blocks where both strands run
  TimeNs serial_ns = 0;                // the two units' ops one after another (estimate)
  TimeNs paired_ns = 0;                // as paired (estimate)
};

// `strategy` must be complete (dp and num_micro_batches derived) and valid (see validity.hpp).
// The double-strand pairing is priced with `profile` (the times the simulator will use); `pairings`,
// when given, receives its summary (double-strand only).
IterationGraph lower_to_op_graphs(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                  std::vector<StrandPairingSummary>* pairings = nullptr);
// As above with the scenario's profile: the built-in one for "builtin", else the file it names (read
// only for double-strand, the one schedule whose graph depends on the profile).
IterationGraph lower_to_op_graphs(const Scenario& scenario, const Strategy& strategy);

// As lower_to_op_graphs, but the classes are lowered one after another into the same op storage (this thread's,
// kept for its next such lowering), each handed to `visit` (the graph and the class's index) before the next is
// lowered over it: `graph` then holds the classes before it placed but emptied, and those after it not yet
// placed. For a simulation that reads the ops only to flatten them: each class is read while still in cache, and
// no graph of the whole iteration is ever held (sim/flat_graph.hpp, Flattener).
using ClassVisitor = std::function<void(const IterationGraph& graph, int rank_class)>;
void lower_class_by_class(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                          std::vector<StrandPairingSummary>* pairings, const ClassVisitor& visit);

}  // namespace twin
