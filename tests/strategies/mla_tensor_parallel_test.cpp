// Multi-latent attention under tensor parallelism, as Megatron-LM runs it (strategies/lowering_mla.hpp): DeepSeek-V3's
// shapes at TP 2, with and without SP, against a hand count of the ops one rank issues, their shapes and their
// collectives' bytes; the once-a-step TP sum of the duplicated weights' gradients; the memory per rank at TP 1 and 2;
// a candidate search of a DeepSeek-V3-shaped model over 8 GPUs that ranks TP 2 plans.
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf_config.hpp"
#include "cost/profile.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/search.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "shipped_scenarios.hpp"
#include "strategy_fixtures.hpp"
#include "tests/core/hf_fixtures.hpp"

namespace twin {
namespace {

constexpr std::int64_t kTpSeq = 4096;  // tokens of one micro-batch (b = 1)

ModelConfig tp_deepseek_v3() {
  nlohmann::json config = testing::hf_fixture("deepseek-v3-config.json");
  config["num_nextn_predict_layers"] = 0;
  ModelConfig m = model_from_hf_config(config, "deepseek-v3-config.json");
  m.num_layers = 2;  // dense layers (DeepSeek-V3's first three are)
  m.moe = MoeConfig{};  // and a dense model: twin refuses MoE at TP > 1 without SP (its experts are not TP-split)
  return m;
}

IterationGraph tp_lowered(const ModelConfig& m, bool sp, bool tp_comm_overlap = false) {
  Scenario scenario = testing::make_scenario(m, 1, kTpSeq, 8);
  scenario.framework.tp_comm_overlap = tp_comm_overlap;
  Strategy st = testing::make_strategy(2, 1, 1, sp);
  st.micro_batch_size = 1;
  EXPECT_EQ(complete_strategy(scenario, st), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, st), std::nullopt);
  return lower_to_op_graphs(scenario, st);
}

bool in_mla_block(const Op& op) {
  const bool tp = op.role == OpRole::tp_gather || op.role == OpRole::tp_scatter || op.role == OpRole::tp_reduce;
  const bool mla = op.role >= OpRole::mla_q_down && op.role <= OpRole::mla_kv_expand;
  const bool mla_collective = tp && op.linear >= OpRole::mla_q_down && op.linear <= OpRole::mla_kv_expand;
  return mla || mla_collective || op.role == OpRole::rope || op.role == OpRole::core_attention;
}

// Layer 0's MLA ops of micro-batch 0 in `phase`, not recomputed, in issue order, without the gradients' accumulation.
std::vector<Op> tp_block_ops(const IterationGraph& g, Phase phase) {
  std::vector<Op> ops;
  const RankClass& rc = g.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.layer == 0 && op.micro_batch == 0 && op.phase == phase && !op.recomputed && in_mla_block(op)) ops.push_back(op);
  }
  return ops;
}

using Step = std::tuple<OpKind, OpRole, std::int64_t>;  // kind, role, its size: a GEMM's m, a norm's rows, bytes

std::vector<Step> tp_steps(const std::vector<Op>& ops) {
  std::vector<Step> out;
  for (const Op& op : ops) {
    std::int64_t size = op.bytes;
    if (op.kind == OpKind::gemm) size = op.gemm.m;
    if (op.kind == OpKind::norm_forward || op.kind == OpKind::norm_backward) size = op.rows;
    if (op.kind == OpKind::rope_forward || op.kind == OpKind::rope_backward) size = op.cols;
    if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) size = op.attention.heads;
    out.emplace_back(op.kind, op.gemm_pass == GemmPass::weight_gradient ? OpRole::none : op.role, size);
  }
  return out;
}

// The expansion's bytes on one rank of 64 heads: kv [t, 64 x 256] and the RoPE key [t, 64] in, K [t, 64 x 192] and
// V [t, 64 x 128] out.
constexpr std::int64_t kExpandBytes = 2 * kTpSeq * (64 * 256 + 64 + 64 * 192 + 64 * 128);

TEST(MlaTensorParallel, ForwardUnderSequenceParallelism) {
  const std::vector<Op> ops = tp_block_ops(tp_lowered(tp_deepseek_v3(), true), Phase::forward);
  using K = OpKind;
  using R = OpRole;
  const std::int64_t rows = kTpSeq / 2;  // the rank's sequence-parallel rows
  // get_query_key_value_tensors: both down projections on the rank's rows, the RoPE key's gather (t x 64), the
  // latents' norms, each up projection after its latent's gather (t x 1536, t x 512).
  const std::vector<Step> expected{
      {K::gemm, R::mla_q_down, rows},
      {K::gemm, R::mla_kv_down, rows},
      {K::all_gather, R::tp_gather, kTpSeq * 64 * 2},
      {K::norm_forward, R::mla_q_norm, rows},
      {K::elementwise, R::mla_kv_norm, 2 * 2 * rows * 512},
      {K::norm_forward, R::mla_kv_norm, rows},
      {K::all_gather, R::tp_gather, kTpSeq * 1536 * 2},
      {K::gemm, R::mla_q_up, kTpSeq},
      {K::all_gather, R::tp_gather, kTpSeq * 512 * 2},
      {K::gemm, R::mla_kv_up, kTpSeq},
      {K::rope_forward, R::rope, 65 * 64},
      {K::elementwise, R::mla_kv_expand, kExpandBytes},
      {K::attention_forward, R::core_attention, 64}};
  ASSERT_EQ(tp_steps(ops), expected);
  EXPECT_EQ(ops[0].gemm.n, 1536);  // the down projections whole
  EXPECT_EQ(ops[0].gemm.k, 7168);
  EXPECT_EQ(ops[1].gemm.n, 576);
  EXPECT_EQ(ops[7].gemm.n, 64 * 192);  // the up projections over the rank's 64 heads
  EXPECT_EQ(ops[7].gemm.k, 1536);
  EXPECT_EQ(ops[9].gemm.n, 64 * 256);
  EXPECT_EQ(ops[9].gemm.k, 512);
  for (const std::size_t i : {2, 6, 8}) {
    EXPECT_EQ(ops[i].group, GroupKind::tensor) << i;
    EXPECT_EQ(ops[i].group_size, 2) << i;
  }
}

TEST(MlaTensorParallel, BackwardUnderSequenceParallelism) {
  const std::vector<Op> ops = tp_block_ops(tp_lowered(tp_deepseek_v3(), true), Phase::backward);
  using K = OpKind;
  using R = OpRole;
  const std::int64_t rows = kTpSeq / 2;
  // Forward's reverse: each up projection gathers its latent again for its weight gradient and reduce-scatters its
  // input gradient; the RoPE key's gradient reduce-scattered; the down projections on the rank's rows, no collective.
  const std::vector<Step> expected{
      {K::attention_backward, R::core_attention, 64},
      {K::elementwise, R::mla_kv_expand, kExpandBytes},
      {K::rope_backward, R::rope, 65 * 64},
      {K::all_gather, R::tp_gather, kTpSeq * 512 * 2},
      {K::gemm, R::mla_kv_up, kTpSeq},
      {K::reduce_scatter, R::tp_scatter, kTpSeq * 512 * 2},
      {K::gemm, R::none, 512},
      {K::all_gather, R::tp_gather, kTpSeq * 1536 * 2},
      {K::gemm, R::mla_q_up, kTpSeq},
      {K::reduce_scatter, R::tp_scatter, kTpSeq * 1536 * 2},
      {K::gemm, R::none, 1536},
      {K::norm_backward, R::mla_kv_norm, rows},
      {K::elementwise, R::mla_kv_norm, 2 * 2 * rows * 512},
      {K::norm_backward, R::mla_q_norm, rows},
      {K::reduce_scatter, R::tp_scatter, kTpSeq * 64 * 2},
      {K::gemm, R::mla_kv_down, rows},
      {K::gemm, R::none, 7168},
      {K::gemm, R::mla_q_down, rows},
      {K::gemm, R::none, 7168}};
  ASSERT_EQ(tp_steps(ops), expected);
  EXPECT_EQ(ops[16].gemm.k, rows);  // the duplicated weight's gradient over the rank's rows
}

TEST(MlaTensorParallel, WithoutSequenceParallelismTheUpProjectionsAllReduce) {
  const std::vector<Op> forward = tp_block_ops(tp_lowered(tp_deepseek_v3(), false), Phase::forward);
  using K = OpKind;
  using R = OpRole;
  // Every rank runs the down projections and norms on all rows; no collective forward (the output projection's
  // all-reduce is outside the block).
  const std::vector<Step> expected_forward{
      {K::gemm, R::mla_q_down, kTpSeq},        {K::gemm, R::mla_kv_down, kTpSeq},
      {K::norm_forward, R::mla_q_norm, kTpSeq}, {K::elementwise, R::mla_kv_norm, 2 * 2 * kTpSeq * 512},
      {K::norm_forward, R::mla_kv_norm, kTpSeq}, {K::gemm, R::mla_q_up, kTpSeq},
      {K::gemm, R::mla_kv_up, kTpSeq},          {K::rope_forward, R::rope, 65 * 64},
      {K::elementwise, R::mla_kv_expand, kExpandBytes}, {K::attention_forward, R::core_attention, 64}};
  EXPECT_EQ(tp_steps(forward), expected_forward);
  int all_reduces = 0;
  for (const Op& op : tp_block_ops(tp_lowered(tp_deepseek_v3(), false), Phase::backward)) {
    EXPECT_NE(op.kind, OpKind::all_gather);
    EXPECT_NE(op.kind, OpKind::reduce_scatter);
    if (op.kind != OpKind::all_reduce) continue;
    ++all_reduces;  // the up projections' input gradients, the latents wide
    EXPECT_EQ(op.bytes, kTpSeq * (op.linear == OpRole::mla_q_up ? 1536 : 512) * 2);
  }
  EXPECT_EQ(all_reduces, 2);
}

// Under SP the duplicated weights' gradients (two layers' down projections and latent norms) are summed over TP
// once a step, in bf16 as the data-parallel reduction; without SP there is nothing to sum.
TEST(MlaTensorParallel, DuplicatedGradientsAreSummedOverTensorParallelOnceAStep) {
  const ModelConfig m = tp_deepseek_v3();
  const std::int64_t per_layer = 7168 * 1536 + 1536 + 7168 * (512 + 64) + 512;
  EXPECT_EQ(layer_parameter_groups(m, 0).duplicated_linears, per_layer);
  for (const bool sp : {true, false}) {
    const IterationGraph g = tp_lowered(m, sp);
    const RankClass& rc = g.classes.front();
    int sums = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.phase != Phase::optimizer || op.group != GroupKind::tensor) continue;
      ++sums;
      EXPECT_EQ(op.kind, OpKind::all_reduce);
      EXPECT_EQ(op.bytes, 2 * per_layer * 2);
    }
    EXPECT_EQ(sums, sp ? 1 : 0) << sp;
  }
}

// Megatron turns userbuffers off for a model with MLA (TELinear.__init__ meets the buffer name 'q_down_proj'): the
// scenario's tp_comm_overlap changes nothing.
TEST(MlaTensorParallel, UserbuffersAreOffAsMegatronTurnsThemOff) {
  const IterationGraph with = tp_lowered(tp_deepseek_v3(), true, true);
  const RankClass& rc = with.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i) EXPECT_EQ(rc.op(i).comm_kernel, CommKernel::nccl) << i;
  EXPECT_EQ(rc.size(), tp_lowered(tp_deepseek_v3(), true, false).classes.front().size());
}

// Memory per rank: under SP every saved tensor halves at TP 2 (the latents on the rank's rows, the heads split);
// without SP the hidden rows and the latents stay whole. The weights: the down projections and latent norms whole.
TEST(MlaTensorParallel, MemoryPerRankAtTensorParallelTwo) {
  ModelConfig m = tp_deepseek_v3();
  m.hidden_dropout = 0;
  const auto saved = [&](int tp, bool sp) {
    return activation_bytes_per_layer(m, kTpSeq, 1, tp, sp, 1, Recompute::none, false, 1, false);
  };
  const Bytes one = saved(1, false);
  EXPECT_EQ(saved(2, true), one / 2);
  const std::int64_t h = 7168, ffn = m.ffn_hidden_size;
  const double whole = 2 * h + 2 * h + 2 * 1536 + 2 * 512;  // norms', down projections' and fc1's inputs, latents
  const double split = (2 * 128 * 192 + 128 * 128 + 128 * 128 + 2 * ffn + ffn) / 2.0;
  EXPECT_EQ(saved(2, false), static_cast<Bytes>(kTpSeq * (2 * (whole + split) + 4 * 64)));
  const LayerParameterGroups g = layer_parameter_groups(m, 0);
  EXPECT_EQ(layer_parameters_per_rank(m, 0, 1, 1).dense - layer_parameters_per_rank(m, 0, 2, 1).dense,
            g.tp_split() / 2);
  EXPECT_GE(layer_parameters_per_rank(m, 0, 2, 1).dense, g.duplicated_linears + g.tp_split() / 2);
}

TEST(MlaTensorParallel, ContextParallelismStaysRefusedByName) {
  const Scenario scenario = testing::make_scenario(tp_deepseek_v3(), 1, kTpSeq, 8);
  Strategy st = testing::make_strategy(1, 1, 2, false);
  st.micro_batch_size = 1;
  ASSERT_EQ(complete_strategy(scenario, st), std::nullopt);
  const std::optional<std::string> reason = invalid_reason(scenario, st);
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("multi-latent attention at context_parallel_size 2"), std::string::npos) << *reason;
}

// The shipped DeepSeek-V3-shaped scenario on one node of 8 GPUs, TP 1 and 2 with and without SP, EP 1 to 4: no
// candidate refused for MLA, the TP 2 plans with SP simulated and ranked (without SP an MoE model is refused at TP 2
// for its experts, not for MLA).
TEST(MlaTensorParallel, ASearchOnEightGpusRanksTensorParallelPlans) {
  const std::filesystem::path file =
      std::filesystem::path(TWIN_SOURCE_DIR) / "scenarios" / "exec-deepseek-v3-mla-small-1xH200.json";
  Scenario scenario = load_scenario(file.string());
  scenario.cluster.node_groups.front().gpus_per_node = 8;
  scenario.training.global_batch_size = 16;
  scenario.search.tensor_model_parallel_size = {1, 2};
  scenario.search.sequence_parallel = {true, false};
  scenario.search.expert_model_parallel_size = {1, 2, 4};
  scenario.search.micro_batch_size = {1};
  scenario.search.recompute = {Recompute::none};
  const Profile profile = testing::profile_of(scenario, file);
  SearchOptions options;
  options.jobs = 1;
  options.exhaustive = true;
  const std::vector<Candidate> ranked = search(scenario, profile, {}, options);
  int tp2_sp = 0, tp2_refused = 0;
  for (const Candidate& c : ranked) {
    EXPECT_EQ(c.infeasible_reason.find("multi-latent"), std::string::npos) << c.infeasible_reason;
    if (c.strategy.tensor_model_parallel_size != 2) continue;
    if (!c.strategy.sequence_parallel) {
      EXPECT_NE(c.infeasible_reason.find("MoE with tensor_model_parallel_size > 1 needs sequence_parallel"),
                std::string::npos) << c.infeasible_reason;
      ++tp2_refused;
      continue;
    }
    ASSERT_TRUE(c.feasible) << c.strategy.key() << ": " << c.infeasible_reason;
    EXPECT_GT(c.result.iteration_ns, 0) << c.strategy.key();
    ++tp2_sp;
  }
  EXPECT_EQ(tp2_sp, 3);  // EP 1, 2 and 4
  EXPECT_EQ(tp2_refused, 3);
}

}  // namespace
}  // namespace twin
