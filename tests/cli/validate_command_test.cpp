// End to end: `twin validate` on two groups of the published table writes validation.csv and validation.md,
// the same bytes twice, and so does `--cross-validate` on three; a bad table names its file and JSON path; an
// unknown group is refused, and so are --group and --fit-prior beside --cross-validate; the profile mismatch of
// `twin simulate` is an error unless --scale-profile asks for scaling.
#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_twin.hpp"

namespace twin::test {
namespace {

const std::string kTable = std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json";

TEST(ValidateCommand, WritesTheErrorsOfTheChosenGroups) {
  TempDir dir("validate-command");
  const std::string out = (dir.path / "v").string();
  Outcome run = run_twin("validate " + kTable + " --group korthikanti2022-table5 --group korthikanti2022-abstract --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("korthikanti22_1T_selective_plus_sp"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("korthikanti2022-table5"), std::string::npos) << run.output;
  const std::string csv = read_file(std::filesystem::path(out) / "validation.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 8 + 2);
  EXPECT_NE(csv.find("korthikanti22_22B_full_recompute,korthikanti2022-table5,high,1.4200,"), std::string::npos) << csv;
  const std::string md = read_file(std::filesystem::path(out) / "validation.md");
  EXPECT_NE(md.find("| **all** | 10 |"), std::string::npos) << md;
  Outcome again = run_twin("validate " + kTable + " --group korthikanti2022-table5 --group korthikanti2022-abstract --out " + out);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_file(std::filesystem::path(out) / "validation.csv"), csv);
  EXPECT_EQ(read_file(std::filesystem::path(out) / "validation.md"), md);
}

TEST(ValidateCommand, BadTablesAndGroupsAreNamed) {
  TempDir dir("validate-bad");
  nlohmann::json table = nlohmann::json::parse(read_file(kTable));
  table["rows"][2]["published"]["value"] = -1;
  const std::string path = (dir.path / "t.json").string();
  write_file(path, table.dump());
  Outcome bad = run_twin("validate " + path + " --out " + (dir.path / "v").string());
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find(path + ": at /rows/2/published/value"), std::string::npos) << bad.output;
  Outcome group = run_twin("validate " + kTable + " --group nobody2099 --out " + (dir.path / "v").string());
  EXPECT_EQ(group.exit_code, 1) << group.output;
  EXPECT_NE(group.output.find("nobody2099"), std::string::npos) << group.output;
}

// The published table cut to the rows of `groups` whose id does not start with one of `left_out`, written to
// `path`.
void write_groups(const std::filesystem::path& path, const std::vector<std::string>& groups,
                  const std::vector<std::string>& left_out) {
  nlohmann::json table = nlohmann::json::parse(read_file(kTable));
  nlohmann::json kept = nlohmann::json::array();
  for (const nlohmann::json& row : table["rows"]) {
    const std::string id = row["id"].get<std::string>();
    const bool dropped =
        std::any_of(left_out.begin(), left_out.end(), [&](const std::string& l) { return id.starts_with(l); });
    if (!dropped && std::find(groups.begin(), groups.end(), row["group"].get<std::string>()) != groups.end())
      kept.push_back(row);
  }
  table["rows"] = kept;
  write_file(path, table.dump());
}

// Two groups priced by the Ampere factor (each fitted on the other; of Korthikanti's Table 5 the 22B rows only,
// for time) and one by the Hopper factor alone: its fold has nothing to fit on, so it is predicted at benchmark
// prices, and the output says so.
TEST(ValidateCommand, CrossValidationPredictsEachGroupWithParametersFittedWithoutIt) {
  TempDir dir("validate-cross");
  const std::filesystem::path table = dir.path / "t.json", out = dir.path / "v";
  write_groups(table, {"korthikanti2022-table5", "korthikanti2022-abstract", "dubey2024-llama3-table4"},
               {"korthikanti22_175B", "korthikanti22_530B_full", "korthikanti22_530B_selective", "korthikanti22_1T"});
  const std::string command = "validate " + table.string() + " --cross-validate --jobs 2 --out " + out.string();
  Outcome run = run_twin(command);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("hopper_in_training: benchmark prices, factor 1 (no other group's rows to fit on)"),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("without korthikanti2022-table5               ampere_in_training = 1."),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("cross-validated (each group predicted"), std::string::npos) << run.output;
  const std::string csv = read_file(out / "validation.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 + 2 + 3);
  EXPECT_NE(csv.find(",optimizer_s,infeasible_reason,in_sample_iteration_s,in_sample_error,fold\n"),
            std::string::npos);
  EXPECT_NE(csv.find(",ampere_in_training=1.1"), std::string::npos) << csv;
  EXPECT_NE(csv.find(";hopper_in_training=benchmark\n"), std::string::npos) << csv;
  const std::string md = read_file(out / "validation.md");
  EXPECT_NE(md.find("| **all** | 7 |"), std::string::npos) << md;
  EXPECT_NE(md.find(" | benchmark (no other group's rows to fit on) |\n"), std::string::npos) << md;
  Outcome again = run_twin(command);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_file(out / "validation.csv"), csv);
  EXPECT_EQ(read_file(out / "validation.md"), md);
}

// A CSV line's fields (none of validation.csv's is quoted in the tables used here).
std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  for (std::string field; std::getline(in, field, separator);) fields.push_back(field);
  return fields;
}

// The mean of a validation.csv column over its rows.
double column_mean(const std::string& csv, const std::string& column) {
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  const auto names = split(line, ',');
  const auto at = std::find(names.begin(), names.end(), column) - names.begin();
  double sum = 0;
  int rows = 0;
  while (std::getline(lines, line)) {
    sum += std::stod(split(line, ',').at(static_cast<std::size_t>(at)));
    ++rows;
  }
  return sum / rows;
}

// A profile that lacks the rows' GPU (h100-x1, A100 rows) scaled for them: the fitted Ampere factor reaches the
// scaled kernel profile, so the in-sample fit makes the rows' mean signed error zero (had the scaled copy kept the
// Hopper factor, the Ampere fit would have read the Hopper sample's move as its own; two small rows of two groups).
TEST(ValidateCommand, CrossValidationFitsTheGpusAProfileIsScaledTo) {
  TempDir dir("validate-cross-scaled");
  const std::filesystem::path table = dir.path / "t.json";
  write_groups(table, {"korthikanti2022-table5", "narayanan2021-table1"},
               {"korthikanti22_175B", "korthikanti22_530B", "korthikanti22_1T", "narayanan21_t1_7", "narayanan21_t1_18",
                "narayanan21_t1_39", "narayanan21_t1_76", "narayanan21_t1_145", "narayanan21_t1_310",
                "narayanan21_t1_529", "narayanan21_t1_1008"});
  Outcome run = run_twin("validate " + table.string() + " --cross-validate --profile h100-x1 --scale-profile --jobs 2 "
                         "--out " + (dir.path / "v").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("without korthikanti2022-table5               ampere_in_training = "), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("without narayanan2021-table1                 ampere_in_training = "), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("all                                           4 rows"), std::string::npos) << run.output;
  EXPECT_NEAR(column_mean(read_file(dir.path / "v" / "validation.csv"), "in_sample_error"), 0.0, 0.001) << run.output;
}

// Cross-validation predicts every group and fits every parameter itself: a chosen group or a prior fitted
// beforehand is a wrong command line; a row whose GPUs two fitted parameters price is bad input.
TEST(ValidateCommand, CrossValidationRefusesGroupsPriorsAndRowsOfTwoParameters) {
  TempDir dir("validate-cross-bad");
  const std::string out = " --out " + (dir.path / "v").string();
  Outcome group = run_twin("validate " + kTable + " --cross-validate --group narayanan2021-table1" + out);
  EXPECT_EQ(group.exit_code, 2) << group.output;
  EXPECT_NE(group.output.find("--group excludes --cross-validate"), std::string::npos) << group.output;
  Outcome prior = run_twin("validate " + kTable + " --fit-prior ampere --cross-validate" + out);
  EXPECT_EQ(prior.exit_code, 2) << prior.output;
  EXPECT_NE(prior.output.find("--fit-prior excludes --cross-validate"), std::string::npos) << prior.output;
  nlohmann::json table = nlohmann::json::parse(read_file(kTable));
  nlohmann::json h100 = table["rows"][0]["scenario"]["cluster"]["nodes"][0];
  h100["gpu"] = "H100-SXM-80GB";
  table["rows"][0]["scenario"]["cluster"]["nodes"].push_back(h100);
  const std::string path = (dir.path / "mixed.json").string();
  write_file(path, table.dump());
  Outcome mixed = run_twin("validate " + path + " --cross-validate" + out);
  EXPECT_EQ(mixed.exit_code, 1) << mixed.output;
  EXPECT_NE(mixed.output.find(path + ": at /rows/0/scenario/cluster"), std::string::npos) << mixed.output;
  EXPECT_NE(mixed.output.find("got ampere_in_training and hopper_in_training"), std::string::npos) << mixed.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "v" / "validation.csv"));
}

TEST(SimulateCommand, AProfileThatDoesNotDescribeTheGpuIsAnErrorUnlessScalingIsAsked) {
  TempDir dir("simulate-scaling");
  const std::string scenario = std::string(TWIN_SOURCE_DIR) + "/scenarios/megatron-gpt-18.4b-256xA100.json";
  Outcome strict = run_twin("simulate " + scenario + " --profile h100-x1 --out " + (dir.path / "a").string());
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_NE(strict.output.find("at /cluster/nodes/0/gpu: a GPU the profile"), std::string::npos) << strict.output;
  EXPECT_NE(strict.output.find("describes, got A100-SXM-80GB (it describes: H100-SXM-80GB); pass --scale-profile"),
            std::string::npos) << strict.output;
  Outcome scaled = run_twin("simulate " + scenario + " --profile h100-x1 --scale-profile --quiet --out " +
                            (dir.path / "b").string());
  ASSERT_EQ(scaled.exit_code, 0) << scaled.output;
  EXPECT_NE(scaled.output.find("A100-SXM-80GB priced from H100-SXM-80GB's kernel profile"), std::string::npos)
      << scaled.output;
  EXPECT_NE(read_file(dir.path / "b" / "report.html").find("<b>Scaled profile.</b>"), std::string::npos);
  EXPECT_NE(read_file(dir.path / "b" / "best.json").find("\"profile_scaling\": true"), std::string::npos);
}

}  // namespace
}  // namespace twin::test
