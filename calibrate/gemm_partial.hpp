// What an interrupted `twin calibrate` keeps: each GPU's GEMM timings so far, in a partial file beside --out
// (OUT.partial.<rank>.json, written atomically every 2 s and at the end of the grid), with what made them: the arguments, the
// GPU (its UUID), the rank count and the list of shapes. The next run with the same arguments on the same GPUs
// times only what is missing; any other run is refused, naming what differs.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op.hpp"
#include "cost/profile.hpp"

namespace twin {

// A hash of the shapes' keys in order: two lists with the same hash are the same list.
std::uint64_t gemm_shapes_hash(const std::vector<GemmShape>& shapes);

std::filesystem::path gemm_partial_path(const std::filesystem::path& out, int rank);

// What must match for a partial file to be continued. `arguments` holds the command line options that choose
// the work (quick, scenario, profile, ...); the shapes are named by their keys' hash and count.
nlohmann::json gemm_partial_identity(const nlohmann::json& arguments, const std::string& gpu_uuid, int rank,
                                     int world_size, const std::vector<GemmShape>& shapes);

// (shape index in `shapes`, round) -> the timing.
using GemmPartialTimings = std::map<std::pair<std::size_t, int>, Measurement>;

void save_gemm_partial(const std::filesystem::path& path, const nlohmann::json& identity,
                       const std::vector<GemmShape>& shapes, const GemmPartialTimings& timings);

// The timings of the partial file at `path` (none when it does not exist). Throws InputError naming the file
// and the first field of `identity` that differs ("made by another calibration"), or what is malformed.
GemmPartialTimings load_gemm_partial(const std::filesystem::path& path, const nlohmann::json& identity,
                                     const std::vector<GemmShape>& shapes);

}  // namespace twin
