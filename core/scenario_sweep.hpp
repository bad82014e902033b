// The scenario's optional "sweep" section: the same scenario at several GPU counts (nodes), global batch sizes,
// sequence lengths or GPU kinds; every combination of the lists given is one point. A point is the scenario's
// document with those fields replaced and the sweep removed, parsed like any scenario, so each is checked as if
// it had been written by hand. `twin sweep` simulates each point (pipeline/sweep_run.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"

namespace twin {

// Points, and values per list: twin sweep simulates every point, so the number is refused beyond this up front.
inline constexpr std::size_t kMaxSweepPoints = 64;

struct SweepAxes {
  std::vector<int> nodes;                         // cluster.nodes[0].count (a cluster of one node group)
  std::vector<std::int64_t> global_batch_size;    // training.global_batch_size
  std::vector<std::int64_t> seq_length;           // training.seq_length
  std::vector<std::string> gpu;                   // cluster.nodes[*].gpu (every node group)
  std::size_t point_count() const;  // the product of the lists' lengths (an absent list counts 1)
};

// The "sweep" section of the scenario document `root`, nullopt without one. Each list non-empty, its values
// distinct and at most kMaxSweepPoints points in all; `nodes` only for a cluster of one node group. Throws
// InputError at the offending JSON path.
std::optional<SweepAxes> parse_sweep_section(const JsonReader& root);

struct SweepPoint {
  std::string label;               // "nodes=2 seq_length=4096": the swept fields and their values
  std::string folder;              // "nodes-2_seq_length-4096": a file name of the same
  std::vector<std::pair<std::string, std::string>> values;  // field -> value, in the order nodes, batch, length, GPU
  nlohmann::json document;         // the scenario at this point, without "sweep"
};

// Every point, in order: nodes outermost, then global_batch_size, seq_length, gpu. `document` is the scenario
// the axes were read from, one that parses (points are built only after it did).
std::vector<SweepPoint> sweep_points(const nlohmann::json& document, const SweepAxes& axes);

}  // namespace twin
