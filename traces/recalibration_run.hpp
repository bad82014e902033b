// `twin calibrate --from-trace RUN_DIR`: the recalibration inputs of a run folder (best.json lowered
// again, so every ops.csv row gets back its op and shapes) and the whole command: fold, re-simulate the
// plan for the record, keep the previous profile, write the new one and the record of what changed.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "calibrate/recalibration.hpp"
#include "core/op_graph.hpp"
#include "core/plan_file.hpp"

namespace twin {

// ops.csv joined to `graph`: one sample per (rank, op) with a measured median; collectives get their
// model time under `profile`. Every row must name an op of the graph (rank_class, op_id, name and kind
// agree) and each (rank, op) appears once; otherwise InputError naming ops.csv, the line and the column.
RunMeasurements read_run_measurements(const std::filesystem::path& ops_csv, const IterationGraph& graph,
                                      const Cluster& cluster, const Profile& profile, const std::string& run);

struct RecalibrateRequest {
  std::filesystem::path run_dir;
  std::string profile;  // empty: best.json's "profile"
  std::string out;      // empty: `profile` in place when it is a file, else RUN_DIR/profile.json
};

struct RecalibrateOutcome {
  std::filesystem::path profile_path;   // written
  std::filesystem::path previous_path;  // the replaced file's bytes, kept; empty when nothing was replaced
  std::filesystem::path changes_json;
  std::filesystem::path changes_md;
  nlohmann::json record;                // what changes_json holds
};

// Where a fold writes: `out`, else `profile` in place when it is a file, else FOLDER/profile.json; the previous
// copy (when the profile exists) and the record beside it. `record` is left empty.
RecalibrateOutcome fold_destination(const std::filesystem::path& folder, const std::string& profile,
                                    const std::string& out);

// The previous version's name beside `path`: P.previous.json, else P.previous-2.json, -3, ... (first free).
std::filesystem::path previous_profile_path(const std::filesystem::path& path);

// Reads and folds everything before writing anything: a bad run folder or profile throws InputError and
// leaves every file as it was. Then writes the previous copy, the record (.changes.json, .changes.md) and
// last the profile (atomic rename), so an interrupted write leaves the old profile in place.
RecalibrateOutcome recalibrate_from_run(const RecalibrateRequest& request);

}  // namespace twin
