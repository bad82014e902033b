// Splitting a Megatron-LM command line as a shell does, and refusing what twin cannot read, naming the line.
#include "core/megatron_command_line.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace twin {
namespace {

std::string command_line_error_of(const std::string& text) {
  try {
    parse_megatron_command_line(text, "run.sh");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MegatronCommandLine, EnvironmentLauncherAndContinuedArguments) {
  const MegatronCommandLine line = parse_megatron_command_line(
      "CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_DEBUG=WARN torchrun --nproc-per-node 8 \\\n"
      "    pretrain_gpt.py --tensor-model-parallel-size 2 \\\n"
      "    --num-layers=32 --swiglu  # a comment --fp16\n"
      "    --cp-comm-type p2p p2p --lr '3e-4' --data-path \"/data/my corpus\"\n",
      "run.sh");
  EXPECT_EQ(line.environment, (std::vector<std::string>{"CUDA_DEVICE_MAX_CONNECTIONS=1", "NCCL_DEBUG=WARN"}));
  EXPECT_EQ(line.launcher, (std::vector<std::string>{"torchrun", "--nproc-per-node", "8", "pretrain_gpt.py"}));
  const std::vector<MegatronArgument> expected = {
      {"--tensor-model-parallel-size", {"2"}}, {"--num-layers", {"32"}}, {"--swiglu", {}},
      {"--cp-comm-type", {"p2p", "p2p"}},      {"--lr", {"3e-4"}},       {"--data-path", {"/data/my corpus"}}};
  EXPECT_EQ(line.arguments, expected);
  EXPECT_EQ(line.argument_lines, (std::vector<int>{2, 3, 3, 4, 4, 4}));
}

// megatron_args.txt: one argument per line, '#' lines between, no command.
TEST(MegatronCommandLine, ArgumentsAloneAsMegatronArgsTxtWritesThem) {
  const MegatronCommandLine line =
      parse_megatron_command_line("# plan tp2\n--micro-batch-size 1\n# note\n--bf16\n", "megatron_args.txt");
  EXPECT_TRUE(line.environment.empty());
  EXPECT_TRUE(line.launcher.empty());
  EXPECT_EQ(line.arguments, (std::vector<MegatronArgument>{{"--micro-batch-size", {"1"}}, {"--bf16", {}}}));
}

TEST(MegatronCommandLine, RefusesWhatItCannotReadNamingTheLineAndFlag) {
  EXPECT_EQ(command_line_error_of("--num-layers $LAYERS"),
            "run.sh: line 1: expected literal words, got the shell expansion '$LAYERS' (twin cannot know its value: "
            "write the value itself)");
  EXPECT_NE(command_line_error_of("--seq-length \"$(cat len)\"").find("shell expansion '$(cat'"), std::string::npos);
  EXPECT_EQ(command_line_error_of("--bf16\n--data-path 'open"),
            "run.sh: line 2: expected a closing ' for the quote opened here, got the end of the text");
  EXPECT_EQ(command_line_error_of("--num-layers 32 \\\n --hidden-size x4096"),
            "run.sh: line 2: --hidden-size: expected an integer, got \"x4096\"");
  EXPECT_EQ(command_line_error_of("--normalization rmsnorm"),
            "run.sh: line 1: --normalization: expected one of LayerNorm, RMSNorm, got \"rmsnorm\"");
  EXPECT_EQ(command_line_error_of("--swiglu yes"),
            "run.sh: line 1: --swiglu: expected no value (it is a switch), got \"yes\"");
  EXPECT_EQ(command_line_error_of("--seq-length"), "run.sh: line 1: --seq-length: expected a value, got none");
  EXPECT_EQ(command_line_error_of("--seq-length 4096 8192"),
            "run.sh: line 1: --seq-length: expected one value, got 2 (\"4096 8192\")");
  EXPECT_EQ(command_line_error_of("--hidden-dropout nan"),
            "run.sh: line 1: --hidden-dropout: expected a number, got \"nan\"");
  EXPECT_EQ(command_line_error_of("num-layers 32"),
            "run.sh: line 1: expected a Megatron argument (--name) or a command running a *.py script, got "
            "\"num-layers\"");
  EXPECT_EQ(command_line_error_of("x\\"), "run.sh: line 1: expected a character after '\\', got the end of the text");
}

TEST(MegatronCommandLine, EmptyTextHasNoArguments) {
  const MegatronCommandLine line = parse_megatron_command_line("  \n# only a comment\n", "empty.txt");
  EXPECT_TRUE(line.arguments.empty());
}

}  // namespace
}  // namespace twin
