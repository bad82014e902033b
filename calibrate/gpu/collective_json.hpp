// JSON of the measured collective tables (Profile::collectives), with nccl-tests' column names. The
// profile file format (calibrate/profile.cpp) does not carry these yet: calibration stores them under
// provenance.collectives, which round-trips through load_profile unchanged.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/profile.hpp"

namespace twin::gpu {

nlohmann::json collectives_to_json(const std::vector<CollectiveTable>& tables);
// Throws std::runtime_error naming `source` and the entry for missing fields or unknown collectives.
std::vector<CollectiveTable> collectives_from_json(const nlohmann::json& document, const std::string& source);

}  // namespace twin::gpu
