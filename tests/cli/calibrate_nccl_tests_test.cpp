// End to end: `twin calibrate --from-nccl-tests` folds logs into a profile that twin reads back; a bad log
// exits 1 naming its line and leaves the profile untouched; option mistakes exit 2.
#include <gtest/gtest.h>

#include "cost/collective_tables.hpp"
#include "cost/profile.hpp"
#include "run_twin.hpp"

namespace twin::test {
namespace {

const std::string kFixtures = std::string(TWIN_SOURCE_DIR) + "/tests/calibrate/fixtures/nccl-tests/";

TEST(CalibrateNcclTests, FoldsLogsIntoAProfile) {
  TempDir dir("nccl-tests");
  const std::string out = (dir.path / "p.json").string();
  Outcome run = run_twin("calibrate --from-nccl-tests " + kFixtures + "all_reduce_perf-8xH100.log " + kFixtures +
                         "allgather-2x4xA100.txt --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("all_reduce over 8 GPUs (8 per node, 1 node) on H100-SXM-80GB: 25 sizes"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("wrote " + out + " (2 collective table(s) from 2 log(s), profile builtin)"),
            std::string::npos) << run.output;
  Profile profile = load_profile(out);
  EXPECT_NE(find_collective_table(profile.collectives, "A100-SXM-80GB", OpKind::all_gather, 8, 4, 2), nullptr);

  // Updating that file in place (no --out): the same table is replaced, not added twice.
  run = run_twin("calibrate --from-nccl-tests " + kFixtures + "all_reduce_perf-8xH100.log --profile " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("replaced"), std::string::npos) << run.output;
  EXPECT_EQ(load_profile(out).collectives.size(), profile.collectives.size());
}

TEST(CalibrateNcclTests, BadLogLeavesTheProfileAndNamesTheLine) {
  TempDir dir("nccl-tests-bad");
  const std::string out = (dir.path / "p.json").string();
  write_file(out, "unchanged");
  std::string log = read_file(kFixtures + "all_reduce_perf-8xH100.log");
  log.replace(log.find("       0    17.33"), 16, "       2    17.33");
  write_file(dir.path / "all_reduce.log", log);
  Outcome run = run_twin("calibrate --from-nccl-tests " + (dir.path / "all_reduce.log").string() + " --out " + out);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find((dir.path / "all_reduce.log").string() + ": line 18: #wrong 2"), std::string::npos)
      << run.output;
  EXPECT_EQ(read_file(out), "unchanged");

  run = run_twin("calibrate --from-nccl-tests " + (dir.path / "missing.log").string() + " --out " + out);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("missing.log: cannot open the file"), std::string::npos) << run.output;
}

TEST(CalibrateNcclTests, OptionMistakesAreUsageErrors) {
  EXPECT_EQ(run_twin("calibrate --from-nccl-tests " + kFixtures + "allgather-2x4xA100.txt --collective allgather").exit_code, 2);
  EXPECT_EQ(run_twin("calibrate --from-nccl-tests " + kFixtures + "allgather-2x4xA100.txt --gpu V100").exit_code, 2);
  EXPECT_EQ(run_twin("calibrate --collective all_reduce").exit_code, 2);
  // --profile alone adds the kernel grid's shapes it lacks, in place: a shipped profile needs --out.
  Outcome profile_alone = run_twin("calibrate --profile builtin");
  EXPECT_EQ(profile_alone.exit_code, 2);
  EXPECT_NE(profile_alone.output.find("--profile builtin names a shipped profile: give --out"), std::string::npos)
      << profile_alone.output;
  const Outcome profile_and_check = run_twin("calibrate --profile my.json --check my.json");
  EXPECT_EQ(profile_and_check.exit_code, 2);
  EXPECT_NE(profile_and_check.output.find("--profile does not go with --check"), std::string::npos)
      << profile_and_check.output;
  // --sustained-clock writes its curve into a profile: it needs one, and measures nothing else.
  const Outcome clock_alone = run_twin("calibrate --sustained-clock");
  EXPECT_EQ(clock_alone.exit_code, 2);
  EXPECT_NE(clock_alone.output.find("--sustained-clock needs --profile"), std::string::npos) << clock_alone.output;
  EXPECT_EQ(run_twin("calibrate --sustained-clock --profile builtin --scenario s.json").exit_code, 2);
  // --collectives adds tables to a profile the same way: it needs one, and excludes the other single parts.
  const Outcome tables_alone = run_twin("calibrate --collectives");
  EXPECT_EQ(tables_alone.exit_code, 2);
  EXPECT_NE(tables_alone.output.find("--collectives needs --profile"), std::string::npos) << tables_alone.output;
  EXPECT_EQ(run_twin("calibrate --collectives --sustained-clock --profile p.json").exit_code, 2);
  EXPECT_EQ(run_twin("calibrate --collectives --profile p.json --scenario s.json").exit_code, 2);
  // --power-model rides on a clock measurement: a whole calibration or --sustained-clock, never an increment or a check.
  const Outcome power_on_increment = run_twin("calibrate --power-model --profile p.json");
  EXPECT_EQ(power_on_increment.exit_code, 2);
  EXPECT_NE(power_on_increment.output.find("--power-model with --profile needs --sustained-clock"), std::string::npos)
      << power_on_increment.output;
  EXPECT_EQ(run_twin("calibrate --power-model --check p.json").exit_code, 2);
  EXPECT_EQ(run_twin("calibrate --power-model --collectives --profile p.json").exit_code, 2);
  // Shapes added to a shipped profile need somewhere to go: the shipped file is not rewritten.
  Outcome shipped = run_twin("calibrate --scenario " + std::string(TWIN_SOURCE_DIR) +
                             "/scenarios/llama3-8b-4xH200.json --profile h200-x1");
  EXPECT_EQ(shipped.exit_code, 2);
  EXPECT_NE(shipped.output.find("names a shipped profile: give --out"), std::string::npos) << shipped.output;
  Outcome help = run_twin("calibrate --help");
  for (const char* option : {"--from-nccl-tests", "--collective", "--gpu", "--collectives", "--power-model"})
    EXPECT_NE(help.output.find(option), std::string::npos) << option;
}

}  // namespace
}  // namespace twin::test
