// A sweep's scaling report (twin sweep): per point, the swept values, the GPUs, the best strategy and its
// throughput, MFU, memory and (with a cost section) cost. scaling.csv holds the figures; scaling.html shows them as
// a table and a bar chart of throughput per GPU, one self-contained page like report.html.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/scenario_cost.hpp"
#include "reports/training_cost.hpp"
#include "strategies/search.hpp"

namespace twin {

struct ScalingRow {
  std::vector<std::pair<std::string, std::string>> values;  // swept field -> value at this point
  std::string folder;          // the point's run folder, relative to the sweep's (points/<folder>)
  int gpus = 0;
  std::size_t candidates = 0, feasible = 0;
  std::optional<Candidate> best;  // nullopt when nothing was feasible
  std::optional<TrainingCost> cost;
  std::string note;            // why there is no best
};

// `fields`: the swept fields, in the order of every row's values. `cost`: the scenario's section, if any.
std::string scaling_csv(const std::vector<std::string>& fields, const std::vector<ScalingRow>& rows,
                        const CostConfig* cost);
// The same as cells, the header row first.
std::vector<std::vector<std::string>> scaling_rows(const std::vector<std::string>& fields,
                                                   const std::vector<ScalingRow>& rows, const CostConfig* cost);
std::string scaling_html(const std::string& scenario_name, const std::vector<std::string>& fields,
                         const std::vector<ScalingRow>& rows, const CostConfig* cost);

}  // namespace twin
