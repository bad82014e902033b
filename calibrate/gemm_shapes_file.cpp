// Read with JsonReader, so that a wrong entry names its file and JSON path as the scenario parser does.
#include "calibrate/gemm_shapes_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace twin {

std::vector<ModelGemm> read_gemm_shapes_file(const std::string& path) {
  const nlohmann::json document = read_json_file(path, "a readable JSON file of GEMM shapes");
  const JsonReader root(document, path);
  if (!root.value().is_array()) root.fail("an array of GEMM shapes ({\"m\": .., \"n\": .., \"k\": ..})");
  std::vector<ModelGemm> gemms;
  std::size_t index = 0;
  for (const JsonReader& entry : root.non_empty_elements()) {
    entry.expect_object();
    entry.only_keys({"m", "n", "k", "count", "transpose_a", "transpose_b", "origin"});
    ModelGemm gemm;
    gemm.shape.m = entry.required("m").positive_int64();
    gemm.shape.n = entry.required("n").positive_int64();
    gemm.shape.k = entry.required("k").positive_int64();
    if (auto count = entry.find("count")) gemm.shape.count = count->positive_int();
    if (auto ta = entry.find("transpose_a")) gemm.shape.transpose_a = ta->boolean();
    if (auto tb = entry.find("transpose_b")) gemm.shape.transpose_b = tb->boolean();
    gemm.origin = fmt::format("{}[{}]", path, index++);
    if (auto origin = entry.find("origin")) gemm.origin = origin->string();
    gemms.push_back(std::move(gemm));
  }
  return gemms;
}

}  // namespace twin
