// twin simulate --megatron-args: a run's megatron_args.txt simulates again as the same plan; a launch line's parts
// twin does not model are listed in a file and named once; hostile command lines (tests/cli/hostile/megatron_args/)
// are refused in one short line naming the file, with exit 1 and no plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "run_twin.hpp"
#include "small_scenario.hpp"

namespace twin::test {
namespace {

namespace fs = std::filesystem;

std::string arguments_of(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#", 0) != 0) out += line + "\n";
  return out;
}

TEST(MegatronArgsCommand, AWinnersArgumentsSimulateAgainAsTheSamePlan) {
  TempDir dir("megatron_round_trip");
  write_file(dir.path / "s.json", small_scenario().dump());
  const std::string scenario = (dir.path / "s.json").string();
  Outcome run = run_twin("simulate " + scenario + " --quiet --top 0 --out " + (dir.path / "a").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string first = read_file(dir.path / "a" / "megatron_args.txt");
  run = run_twin("simulate " + scenario + " --quiet --top 0 --megatron-args " +
                 (dir.path / "a" / "megatron_args.txt").string() + " --out " + (dir.path / "b").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(arguments_of(read_file(dir.path / "b" / "megatron_args.txt")), arguments_of(first));
  EXPECT_FALSE(fs::exists(dir.path / "b" / "megatron_args_not_modelled.txt"));  // twin's own file: all modelled
}

TEST(MegatronArgsCommand, WhatIsNotModelledIsListedInAFileAndNamedOnce) {
  TempDir dir("megatron_not_modelled");
  write_file(dir.path / "s.json", small_scenario().dump());
  write_file(dir.path / "train.sh",
             "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nproc-per-node 4 pretrain_gpt.py \\\n"
             "  --tensor-model-parallel-size 2 --num-layers 4 --hidden-size 4096 --num-attention-heads 32 \\\n"
             "  --seq-length 2048 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 \\\n"
             "  --swiglu --normalization RMSNorm --position-embedding-type rope --bf16 --attention-backend flash \\\n"
             "  --lr 3e-4 --weight-decay 0.1 --data-path /data/corpus\n");
  const Outcome run = run_twin("simulate " + (dir.path / "s.json").string() + " --quiet --top 0 --megatron-args " +
                               (dir.path / "train.sh").string() + " --out " + (dir.path / "o").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("train.sh: 4 part(s) of the command line are not modelled, listed in"), std::string::npos)
      << run.output;
  EXPECT_EQ(read_file(dir.path / "o" / "megatron_args_not_modelled.txt"),
            "CUDA_DEVICE_MAX_CONNECTIONS=1: the environment, not modelled\n"
            "torchrun --nproc-per-node 4 pretrain_gpt.py: the launcher; the GPUs are the scenario's cluster\n"
            "--weight-decay 0.1: not modelled\n"
            "--data-path /data/corpus: not modelled\n");
  EXPECT_NE(read_file(dir.path / "o" / "best.json").find("tp2.pp1.cp1.ep1.dp2"), std::string::npos);
}

TEST(MegatronArgsCommand, EveryHostileCommandLineIsRefusedInOneShortLine) {
  TempDir dir("megatron_hostile");
  write_file(dir.path / "s.json", small_scenario().dump());
  int files = 0;
  for (const auto& entry : fs::directory_iterator(std::string(TWIN_SOURCE_DIR) + "/tests/cli/hostile/megatron_args")) {
    const Outcome run = run_twin("simulate " + (dir.path / "s.json").string() + " --quiet --megatron-args " +
                                 entry.path().string() + " --out " + (dir.path / "o").string());
    expect_one_clean_error_line(run, 600, entry.path());
    EXPECT_NE(run.output.find(entry.path().filename().string()), std::string::npos) << run.output.substr(0, 500);
    EXPECT_FALSE(fs::exists(dir.path / "o" / "best.json")) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 9);
}

}  // namespace
}  // namespace twin::test
