// The facts of Megatron-LM's flags and each rule of validate_args twin holds, on command lines that keep or break it.
#include "core/megatron_flags.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace twin {
namespace {

// "--a 1 --b --c x y": words into arguments, each flag's values up to the next flag.
MegatronArguments arguments(const std::string& line) {
  std::vector<MegatronArgument> out;
  std::istringstream in(line);
  for (std::string word; in >> word;) {
    if (word.rfind("--", 0) == 0)
      out.push_back({word, {}});
    else
      out.back().values.push_back(word);
  }
  return MegatronArguments(out);
}

const std::string kValid =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
    "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 16 ";

std::string broken(const std::string& extra, long long world = 8, std::optional<std::string> connections = {}) {
  return megatron_rule_broken(arguments(kValid + extra), world, connections).value_or("");
}

TEST(MegatronFlags, EachFlagOnceWithItsSource) {
  std::set<std::string_view> names;
  for (const MegatronFlag& flag : megatron_flags()) {
    EXPECT_TRUE(names.insert(flag.name).second) << flag.name;
    EXPECT_TRUE(flag.name.starts_with("--")) << flag.name;
    EXPECT_TRUE(flag.declared_at.starts_with("megatron/")) << flag.name;
    EXPECT_EQ(flag.kind == MegatronFlagKind::choice, !flag.choices.empty()) << flag.name;
  }
  EXPECT_EQ(find_megatron_flag("--use-custom-fsdp"), nullptr);  // gone from Megatron-LM
  EXPECT_EQ(find_megatron_flag("--seq-length")->kind, MegatronFlagKind::integer);
}

TEST(MegatronFlags, ValuesAreCheckedAsArgparseWould) {
  EXPECT_EQ(megatron_value_error({"--seq-length", {"4096"}}), std::nullopt);
  EXPECT_EQ(megatron_value_error({"--seq-length", {"4k"}}), "expected an integer, got \"4k\"");
  EXPECT_EQ(megatron_value_error({"--seq-length", {"2000000000000"}}),
            "expected an integer within +-2^40, got 2000000000000");
  EXPECT_EQ(megatron_value_error({"--attention-backend", {"flash2"}}),
            "expected one of flash, fused, unfused, local, auto, got \"flash2\"");
  EXPECT_EQ(megatron_value_error({"--cp-comm-type", {"p2p", "allgather"}}), std::nullopt);  // nargs '+'
  EXPECT_EQ(megatron_value_error({"--bf16", {"1"}}), "expected no value, got \"1\"");
  EXPECT_EQ(megatron_value_error({"--lr", {"x"}}), "expected a number, got \"x\"");  // the training recipe's
  EXPECT_EQ(megatron_value_error({"--weight-decay", {"x"}}), std::nullopt);  // not twin's to check
}

TEST(MegatronFlags, EachRuleOfValidateArgs) {
  EXPECT_EQ(broken(""), "");
  EXPECT_EQ(broken("--tensor-model-parallel-size 0"),
            "--tensor-model-parallel-size: expected a size in [1, 65536], got 0");
  EXPECT_NE(broken("--tensor-model-parallel-size 3").find("(arguments.py:432)"), std::string::npos);
  EXPECT_NE(broken("--global-batch-size 12").find("num_microbatches_calculator.py:582"), std::string::npos);
  EXPECT_NE(broken("--tensor-model-parallel-size 8 --num-attention-heads 12").find("transformer_config.py:1446"),
            std::string::npos);
  EXPECT_NE(broken("--tensor-model-parallel-size 8 --group-query-attention --num-query-groups 3")
                .find("transformer_config.py:1462"),
            std::string::npos);
  EXPECT_NE(broken("--expert-model-parallel-size 2").find("(arguments.py:1655)"), std::string::npos);
  EXPECT_NE(broken("--tp-comm-overlap --sequence-parallel").find("(arguments.py:1441)"), std::string::npos);
  EXPECT_EQ(broken("--tp-comm-overlap --sequence-parallel --tensor-model-parallel-size 2"), "");
  EXPECT_NE(broken("--seq-length 8192").find("(arguments.py:1354)"), std::string::npos);
  EXPECT_NE(
      broken("--context-parallel-size 8 --seq-length 4004 --max-position-embeddings 4096").find("(arguments.py:1336)"),
      std::string::npos);
  EXPECT_NE(broken("--pipeline-model-parallel-size 2 --num-layers 31").find("(arguments.py:997)"), std::string::npos);
  EXPECT_EQ(broken("--pipeline-model-parallel-size 2 --num-layers 31 --account-for-loss-in-pipeline-split"), "");
  EXPECT_NE(
      broken("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 5").find("(arguments.py:972)"),
      std::string::npos);
  EXPECT_NE(broken("--num-layers-per-virtual-pipeline-stage 8").find("(arguments.py:1002)"), std::string::npos);
  EXPECT_NE(broken("--overlap-param-gather --overlap-grad-reduce").find("(arguments.py:1025)"), std::string::npos);
  EXPECT_NE(broken("--overlap-param-gather --use-distributed-optimizer").find("(arguments.py:1028)"),
            std::string::npos);
  EXPECT_NE(broken("--fp16 --bf16").find("(arguments.py:1196)"), std::string::npos);
  EXPECT_NE(broken("--swiglu --squared-relu").find("argument_utils.py:321"), std::string::npos);
  EXPECT_NE(broken("--swiglu --quick-geglu").find("argument_utils.py:324"), std::string::npos);
  // Biased grouped experts (gpt-oss) without --no-bias-dropout-fusion: TEGroupedMLP's assertion.
  EXPECT_NE(broken("--num-experts 8 --moe-grouped-gemm").find("experts.py:205"), std::string::npos);
  EXPECT_EQ(broken("--num-experts 8 --moe-grouped-gemm --no-bias-dropout-fusion"), "");
  EXPECT_EQ(broken("--num-experts 8 --moe-grouped-gemm --disable-bias-linear"), "");
  EXPECT_EQ(broken("--num-experts 8"), "");  // SequentialMLP has no such assertion
  EXPECT_NE(broken("--recompute-granularity selective --recompute-method uniform").find("(arguments.py:1425)"),
            std::string::npos);
  EXPECT_NE(broken("--recompute-granularity full").find("transformer_config.py:1913"), std::string::npos);
  const std::string fsdp = "--use-megatron-fsdp --ckpt-format fsdp_dtensor ";
  EXPECT_EQ(broken(fsdp), "");
  EXPECT_NE(broken(fsdp, 8, "1").find("(arguments.py:1166)"), std::string::npos);
  EXPECT_NE(broken("--use-megatron-fsdp").find("(arguments.py:1169)"), std::string::npos);
  EXPECT_NE(broken(fsdp + "--optimizer lion").find("(arguments.py:1150)"), std::string::npos);
  EXPECT_NE(broken("--ckpt-format fsdp_dtensor").find("(arguments.py:1676)"), std::string::npos);
}

}  // namespace
}  // namespace twin
