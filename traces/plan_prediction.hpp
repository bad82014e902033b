// What best.json predicted, read back for comparison with a measured run: every op's start and duration
// (rank_classes[].ops, columns kPlanOpColumns), each class's finish and the iteration time. Malformed
// plans throw InputError naming the JSON path.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "core/units.hpp"

namespace twin {

struct PredictedOpTime {
  TimeNs start_ns = 0;
  TimeNs duration_ns = 0;
};

// The ops of rank_classes[rank_class] in OpIndex order. `source` names the file in errors.
std::vector<PredictedOpTime> predicted_op_times(const nlohmann::json& plan, int rank_class,
                                                const std::string& source = "best.json");

struct PlanPrediction {
  TimeNs iteration_ns = 0;                           // predicted/iteration_ns
  std::vector<TimeNs> class_finish_ns;               // rank_classes[c].finish_ns
  std::vector<std::vector<PredictedOpTime>> ops;     // [class][OpIndex]
};

// Reads the whole prediction and checks it against the graph the executor lowered: one entry per class,
// and per op the same op_id, kind, role, layer, micro_batch and stream (so the two sides name the same
// ops in the same order).
PlanPrediction read_plan_prediction(const nlohmann::json& plan, const IterationGraph& graph,
                                    const std::string& source = "best.json");

}  // namespace twin
