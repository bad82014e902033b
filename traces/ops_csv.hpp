// ops.csv of a measured run: one RFC-4180 row per (rank, op) with the op's identity, its predicted start
// and duration from best.json and its measured median/min/max, so predicted and measured read side by side.
#pragma once
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "traces/measured_ops.hpp"
#include "traces/plan_prediction.hpp"

namespace twin {

// The header row's column names, in order.
const std::vector<std::string>& ops_csv_columns();

// Rows by rank (ascending), then by OpIndex. op_id is the OpIndex within the rank class; measured
// columns are empty for an absent op; error is measured_median / predicted_duration - 1 with 4 decimals,
// empty when either is missing. Lines end in CRLF. Throws std::invalid_argument when a rank repeats,
// names a class outside `graph`, or its ops or the prediction do not match the class.
std::string ops_csv(const IterationGraph& graph, const std::vector<MeasuredRank>& ranks,
                    const PlanPrediction& prediction);

}  // namespace twin
