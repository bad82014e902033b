// Reading a run folder back: ops.csv parsing, and every missing or malformed input is an InputError
// naming the file and the JSON path or CSV line.
#include <functional>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "reports/execution_run.hpp"
#include "tests/reports/execution_fixture.hpp"
#include "traces/ops_csv.hpp"
#include "traces/ops_csv_reader.hpp"

namespace twin {
namespace {

std::string header() {
  std::string text;
  for (const std::string& column : ops_csv_columns()) text += (text.empty() ? "" : ",") + column;
  return text + "\r\n";
}

// The InputError `load` throws (failing the test when it throws none or another kind).
template <typename Load>
InputError input_error(Load load) {
  try {
    load();
  } catch (const InputError& error) {
    return error;
  }
  ADD_FAILURE() << "no InputError";
  return InputError("", "", "");
}

TEST(OpsCsvReader, ParsesQuotedFieldsAndEmptyMeasurements) {
  const std::string text = header() +
                           "0,0,0,\"a \"\"quoted\"\", name\",gemm,fc1,forward,3,1,compute,10,20,30,25,35,2,0.5000,2\r\n"
                           "1,0,0,plain,elementwise,mlp_residual,backward,-1,-1,compute,40,50,,,,0,,0\n";
  const std::vector<OpsCsvRow> rows = parse_ops_csv(text, "ops.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[0].name, "a \"quoted\", name");
  EXPECT_EQ(rows[0].layer, 3);
  EXPECT_EQ(rows[0].measured_median_ns, 30);
  EXPECT_EQ(rows[0].kernels, 2);
  EXPECT_EQ(rows[1].line, 3);
  EXPECT_EQ(rows[1].micro_batch, -1);
  EXPECT_FALSE(rows[1].measured_median_ns);
  EXPECT_EQ(rows[1].predicted_duration_ns, 50);
  EXPECT_EQ(rows[0].shared_gpu_iterations, 2);
}

// Runs written before the last column, shared_gpu_iterations, existed read with 0 there.
TEST(OpsCsvReader, AnOlderHeaderWithoutSharedGpuIterationsReads) {
  std::string older = header();
  older.erase(older.find(",shared_gpu_iterations"), std::string(",shared_gpu_iterations").size());
  const std::vector<OpsCsvRow> rows =
      parse_ops_csv(older + "0,0,0,x,gemm,fc1,forward,0,0,compute,10,20,30,25,35,1,\r\n", "ops.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].shared_gpu_iterations, 0);
  // A row of the other form than its header is refused.
  EXPECT_EQ(input_error([&] {
              parse_ops_csv(older + "0,0,0,x,gemm,fc1,forward,0,0,compute,10,20,30,25,35,1,,0\r\n", "ops.csv");
            }).json_path(),
            "line 2");
}

TEST(OpsCsvReader, ErrorsNameLineAndColumn) {
  const InputError bad_number = input_error([&] {
    parse_ops_csv(header() + "0,0,0,x,gemm,fc1,forward,0,0,compute,10,20,30,25,35,1,,0\r\n"
                             "1,0,0,y,gemm,fc1,forward,0,0,compute,10,20,3x0,25,35,1,,0\r\n",
                  "run/ops.csv");
  });
  EXPECT_EQ(bad_number.file(), "run/ops.csv");
  EXPECT_EQ(bad_number.json_path(), "line 3, column measured_median_ns");
  EXPECT_NE(std::string(bad_number.what()).find("\"3x0\""), std::string::npos);

  EXPECT_EQ(input_error([&] { parse_ops_csv("op_id,rank\r\n", "ops.csv"); }).json_path(), "line 1");
  EXPECT_EQ(input_error([&] { parse_ops_csv(header() + "0,0,0\r\n", "ops.csv"); }).json_path(), "line 2");
  EXPECT_EQ(input_error([&] {
              parse_ops_csv(header() + "0,0,0,x,gemm,fc1,forward,0,0,compute,10,20,30,,35,1,,0\r\n", "ops.csv");
            }).json_path(),
            "line 2, column measured_min_ns");
}

class RunFolder : public ::testing::Test {
 protected:
  test::TempDir dir{"execution-inputs"};
  std::filesystem::path run = testing::copy_fixture("7b4l-mbs1-h200", dir.path);

  void edit_json(const std::string& file, const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json document = nlohmann::json::parse(test::read_file(run / file));
    change(document);
    test::write_file(run / file, document.dump(1));
  }
  void replace_in(const std::string& file, const std::string& from, const std::string& to) {
    std::string text = test::read_file(run / file);
    const std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    test::write_file(run / file, text);
  }
};

TEST_F(RunFolder, MissingFilesAreNamed) {
  std::filesystem::remove(run / "metrics.json");
  const InputError missing = input_error([&] { load_executed_run(run); });
  EXPECT_EQ(missing.file(), (run / "metrics.json").string());
  EXPECT_NE(std::string(missing.what()).find("not found"), std::string::npos);

  std::filesystem::remove(run / "ops.csv");
  std::filesystem::remove(run / "best.json");
  const InputError all = input_error([&] { load_executed_run(run); });
  EXPECT_EQ(all.file(), (run / "best.json").string());
  for (const char* file : {"best.json", "metrics.json", "ops.csv"})
    EXPECT_NE(std::string(all.what()).find(file), std::string::npos) << file;
}

TEST_F(RunFolder, MalformedMetricsNameTheJsonPath) {
  edit_json("metrics.json", [](nlohmann::json& m) { m["steps"][2]["iteration_s"] = "slow"; });
  const InputError error = input_error([&] { load_executed_run(run); });
  EXPECT_EQ(error.file(), (run / "metrics.json").string());
  EXPECT_EQ(error.json_path(), "/steps/2/iteration_s");
}

TEST_F(RunFolder, MetricsOfAnotherPlanAreRefused) {
  edit_json("metrics.json", [](nlohmann::json& m) { m["strategy"] = "tp2.pp1"; });
  const InputError error = input_error([&] { load_executed_run(run); });
  EXPECT_EQ(error.json_path(), "/strategy");
}

TEST_F(RunFolder, MetricsThatAreNotJson) {
  test::write_file(run / "metrics.json", "{ \"format\": ");
  EXPECT_EQ(input_error([&] { load_executed_run(run); }).file(), (run / "metrics.json").string());
}

TEST_F(RunFolder, OpsRowOfAnotherOpNamesItsLine) {
  // Line 4 is op c0.2, L0.qkv_projection.fwd.mb0.
  replace_in("ops.csv", "2,0,0,L0.qkv_projection.fwd.mb0", "2,0,0,L0.fc1.fwd.mb0");
  const InputError error = input_error([&] { load_executed_run(run); });
  EXPECT_EQ(error.file(), (run / "ops.csv").string());
  EXPECT_EQ(error.json_path(), "line 4, column name");
}

TEST_F(RunFolder, OpsPredictionOfAnotherPlanNamesItsLine) {
  replace_in("ops.csv", ",compute,92064,579694,", ",compute,92064,579695,");
  EXPECT_EQ(input_error([&] { load_executed_run(run); }).json_path(), "line 4, column predicted_duration_ns");
}

TEST_F(RunFolder, MalformedPlanNamesTheJsonPath) {
  edit_json("best.json", [](nlohmann::json& plan) { plan["rank_classes"][0]["ops"][5][6] = -3; });
  const InputError error = input_error([&] { load_executed_run(run); });
  EXPECT_EQ(error.file(), (run / "best.json").string());
  EXPECT_EQ(error.json_path(), "/rank_classes/0/ops/5/6");
}

TEST_F(RunFolder, MalformedTraceNamesTheJsonPath) {
  const std::filesystem::path trace = run / "traces" / "measured_rank0.json";
  nlohmann::json document = nlohmann::json::parse(test::read_file(trace));
  document["traceEvents"][5]["args"]["op_index"] = 114;  // the class has ops 0..113
  test::write_file(trace, document.dump());
  const InputError error = input_error([&] { load_executed_run(run); });
  EXPECT_EQ(error.file(), trace.string());
  EXPECT_EQ(error.json_path(), "/traceEvents/5/args/op_index");
}

TEST_F(RunFolder, AskedRankWithoutTrace) {
  RunFolderOptions options;
  options.timeline_rank = 3;
  const InputError error = input_error([&] { load_executed_run(run, options); });
  EXPECT_EQ(error.file(), (run / "traces" / "measured_rank3.json").string());
}

}  // namespace
}  // namespace twin
