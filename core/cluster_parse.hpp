// Reads a scenario's "cluster" object (DESIGN.md's format) into a Cluster; InputErrors name the JSON path.
#pragma once
#include <cstdint>

#include "core/cluster.hpp"
#include "core/json_reader.hpp"

namespace twin {

// Upper bounds keep every derived count far inside 64-bit integers.
inline constexpr std::int64_t kMaxNodes = 1 << 17;
inline constexpr std::int64_t kMaxGpusPerNode = 1024;
inline constexpr std::int64_t kMaxGpus = 1 << 24;

Cluster parse_cluster(const JsonReader& r);

}  // namespace twin
