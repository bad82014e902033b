// The measured collective tables of a calibrated profile (Profile::collectives): their JSON form, their
// lookup by GPU and group placement, and the time they give a message of any size. The simulator prices
// a measured collective from here (sim/measured_collectives.hpp).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/json_reader.hpp"

namespace twin {

// The format of the profile's top-level "collectives" object; bumped when its fields change meaning.
inline constexpr int kCollectiveTablesVersion = 1;
// The collectives calibration measures, in tables and interference pairs (send stands for nccl-tests' sendrecv: each
// rank sends S to the next rank of the ring and receives S from the previous one).
inline constexpr OpKind kMeasuredCollectives[] = {OpKind::all_reduce, OpKind::all_gather, OpKind::reduce_scatter,
                                                  OpKind::all_to_all, OpKind::send};

// {"version", "columns": [size_B, time_us, algbw_GBps, busbw_GBps], "tables": [...]}: one entry per table
// with its GPU, collective, placement, nominal bandwidth, fitted link model and rows in those columns.
nlohmann::json collective_tables_to_json(const std::vector<CollectiveTable>& tables);
// Throws InputError (file and JSON path) for corrupt or partial tables: unknown collectives, impossible
// placements, missing fields, rows that are not 4 positive numbers in strictly ascending size, duplicates.
std::vector<CollectiveTable> collective_tables_from_json(const JsonReader& collectives);
// The first calibrations' provenance.collectives: an array of tables without "gpu" (given here) or version.
std::vector<CollectiveTable> legacy_collective_tables_from_json(const JsonReader& tables, const std::string& gpu);

// The table of `collective` on GPUs named `gpu` (compared ignoring case and punctuation) over exactly this
// placement, of `blocks_per_peer` blocks (all_to_all; 1 for every table of another collective); nullptr when none
// was measured.
const CollectiveTable* find_collective_table(const std::vector<CollectiveTable>& tables, std::string_view gpu,
                                             OpKind collective, int group_size, int ranks_per_node, int nodes,
                                             int blocks_per_peer = 1);

// The table's fitted link model at nccl-tests' size S: steps * latency + factor * S / (nominal * eff(S)).
double collective_fit_time_us(const CollectiveTable& table, double size_bytes);
// Measured time at S: log-log interpolation between the two measured sizes around S; beyond the table's
// ends, the fitted model scaled to agree with the end point (continuous, the model's shape). 0 for S <= 0.
double collective_table_time_us(const CollectiveTable& table, double size_bytes);

}  // namespace twin
