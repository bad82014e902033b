// The file is JSON, read back with the checked reader (it is input like any other: a hand-edited or truncated
// one is refused with its path, never trusted). Timings are keyed by the shape's profile key, not its index,
// so that the file says what it holds.
#include "calibrate/gemm_partial.hpp"

#include <unordered_map>

#include <fmt/format.h>

#include "calibrate/gemm_merge.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace twin {
namespace {

constexpr const char* kFormat = "twin calibrate: partial GEMM timings";

}  // namespace

std::uint64_t gemm_shapes_hash(const std::vector<GemmShape>& shapes) {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a over the keys, in order
  for (const GemmShape& shape : shapes)
    for (const char c : gemm_key(shape) + "\n") hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

std::filesystem::path gemm_partial_path(const std::filesystem::path& out, int rank) {
  std::filesystem::path path = out;
  path += fmt::format(".partial.{}.json", rank);
  return path;
}

nlohmann::json gemm_partial_identity(const nlohmann::json& arguments, const std::string& gpu_uuid, int rank,
                                     int world_size, const std::vector<GemmShape>& shapes) {
  return {{"arguments", arguments}, {"gpu_uuid", gpu_uuid}, {"rank", rank}, {"world_size", world_size},
          {"shape_count", shapes.size()}, {"shapes_hash", fmt::format("{:016x}", gemm_shapes_hash(shapes))}};
}

void save_gemm_partial(const std::filesystem::path& path, const nlohmann::json& identity,
                       const std::vector<GemmShape>& shapes, const GemmPartialTimings& timings) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [at, m] : timings)
    rows.push_back({{"shape", gemm_key(shapes[at.first])}, {"round", at.second}, {"median_ns", m.median_ns},
                    {"p10_ns", m.p10_ns}, {"p90_ns", m.p90_ns}, {"samples", m.samples}, {"sm_clock_MHz", m.sm_clock_MHz}});
  const nlohmann::json file = {{"format", kFormat}, {"identity", identity}, {"timings", rows}};
  write_file_atomically(path, file.dump(1));
}

GemmPartialTimings load_gemm_partial(const std::filesystem::path& path, const nlohmann::json& identity,
                                     const std::vector<GemmShape>& shapes) {
  GemmPartialTimings timings;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return timings;
  const std::string file = path.string();
  const nlohmann::json document = read_json_file(file, "a partial calibration file");
  const JsonReader root(document, file);
  root.only_keys({"format", "identity", "timings"});
  if (root.required("format").string() != kFormat) root.required("format").fail(fmt::format("\"{}\"", kFormat));
  const JsonReader saved = root.required("identity");
  saved.expect_object();
  for (const auto& [field, wanted] : identity.items()) {
    const auto there = saved.find(field);
    if (!there || there->value() != wanted)
      throw InputError(file, "/identity/" + field,
                       fmt::format("the calibration being run (made by another one: {} there, {} here); run with the "
                                   "same arguments on the same GPUs to continue it, or remove the file",
                                   there ? there->value().dump() : "nothing", wanted.dump()));
  }
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < shapes.size(); ++i) index.emplace(gemm_key(shapes[i]), i);
  for (const JsonReader& row : root.required("timings").elements()) {
    row.only_keys({"shape", "round", "median_ns", "p10_ns", "p90_ns", "samples", "sm_clock_MHz"});
    const JsonReader key = row.required("shape");
    const auto found = index.find(key.string());
    if (found == index.end()) key.fail("a GEMM shape of this calibration");
    Measurement m;
    m.median_ns = row.required("median_ns").positive_number();
    m.p10_ns = row.required("p10_ns").positive_number();
    m.p90_ns = row.required("p90_ns").positive_number();
    m.samples = row.required("samples").positive_int();
    m.sm_clock_MHz = row.required("sm_clock_MHz").number(0, 1e5, "a clock in MHz");
    const int round = static_cast<int>(row.required("round").integer(0, 1000));
    timings[{found->second, round}] = m;
  }
  return timings;
}

}  // namespace twin
