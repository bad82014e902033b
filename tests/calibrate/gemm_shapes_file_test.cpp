// The GEMM shapes file of `twin calibrate --check-gemms`: defaults, and errors that name file and path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "calibrate/gemm_shapes_file.hpp"
#include "core/error.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

fs::path write_shapes(const std::string& name, const std::string& text) {
  const fs::path path = test::scratch_path(name + ".json");
  std::ofstream(path) << text;
  return path;
}

void expect_error(const std::string& text, const std::string& json_path, const std::string& expected) {
  const fs::path path = write_shapes("bad", text);
  try {
    read_gemm_shapes_file(path.string());
    ADD_FAILURE() << "no error for " << text;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path.string());
    EXPECT_EQ(e.json_path(), json_path) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  fs::remove(path);
}

TEST(GemmShapesFile, ReadsShapesWithDefaults) {
  const fs::path path = write_shapes(
      "good", R"([{"m": 4096, "n": 4096, "k": 1376, "origin": "fc2, TP 8"},
                  {"m": 8, "n": 16, "k": 32, "count": 4, "transpose_a": true, "transpose_b": false}])");
  const std::vector<ModelGemm> gemms = read_gemm_shapes_file(path.string());
  ASSERT_EQ(gemms.size(), 2u);
  EXPECT_EQ(gemms[0].shape.k, 1376);
  EXPECT_EQ(gemms[0].shape.count, 1);
  EXPECT_FALSE(gemms[0].shape.transpose_a);
  EXPECT_EQ(gemms[0].origin, "fc2, TP 8");
  EXPECT_EQ(gemms[1].shape.count, 4);
  EXPECT_TRUE(gemms[1].shape.transpose_a);
  EXPECT_EQ(gemms[1].origin, path.string() + "[1]");
  fs::remove(path);
}

TEST(GemmShapesFile, BadInputNamesFileAndPath) {
  expect_error("[{\"m\": 1, \"n\": 2", "", "malformed JSON (byte 17)");
  expect_error("{\"m\": 1}", "", "an array of GEMM shapes");
  expect_error("[]", "", "non-empty array");
  expect_error("[{\"m\": 1, \"n\": 2}]", "/0", "missing required key 'k'");
  expect_error("[{\"m\": 1, \"n\": 2, \"k\": 0}]", "/0/k", "");
  expect_error("[{\"m\": 1, \"n\": 2, \"k\": 3}, {\"m\": 1, \"n\": 2, \"k\": 3, \"kk\": 3}]", "/1/kk", "did you mean 'k'");
  expect_error("[{\"m\": 1, \"n\": 2, \"k\": 3, \"transpose_a\": 1}]", "/0/transpose_a", "");
  try {
    read_gemm_shapes_file("/nonexistent/shapes.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "/nonexistent/shapes.json");
  }
}

}  // namespace
}  // namespace twin
