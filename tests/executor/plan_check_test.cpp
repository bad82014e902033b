// What twin execute refuses before launching, checked without a GPU: a plan it ran passes; each refusal
// names the plan file and the JSON path at fault.
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "executor/plan_check.hpp"
#include "tests/executor/plan_check_fixture.hpp"
#include "tests/executor/asymmetric_fixtures.hpp"
#include "tests/reports/execution_fixture.hpp"
#include "cost/profile.hpp"
#include "reports/best_plan.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/per_layer/per_layer_search.hpp"
#include "tests/strategies/hot_switch/hot_switch_fixture.hpp"
#include "tests/strategies/per_layer/per_layer_fixture.hpp"

namespace twin::exec {
namespace {

using testing_plan_check::executed_plan;
using testing_plan_check::kFile;
using testing_plan_check::refusal_path;

TEST(PlanCheck, APlanTheExecutorRanPasses) { EXPECT_EQ(refusal_path(executed_plan()), ""); }

TEST(PlanCheck, RunsFp32AndBf16OptimizerStateOnly) {
  Plan narrow = executed_plan();
  narrow.scenario.training.optimizer_precision = {StateDtype::bf16, StateDtype::bf16, StateDtype::fp32};
  EXPECT_EQ(refusal_path(narrow), "");
  Plan fp8 = executed_plan();
  fp8.scenario.training.optimizer_precision.exp_avg_sq = StateDtype::fp8;
  EXPECT_EQ(refusal_path(fp8), "/scenario/training/exp_avg_sq_dtype");
  Plan fp16 = executed_plan();
  fp16.scenario.training.optimizer_precision.main_params = StateDtype::fp16;
  EXPECT_EQ(refusal_path(fp16), "/scenario/training/main_params_dtype");
  Plan sgd = executed_plan();
  sgd.scenario.training.optimizer = "sgd";
  EXPECT_EQ(refusal_path(sgd), "/scenario/training/optimizer");
  Plan fp32 = executed_plan();
  fp32.scenario.training.precision = "fp32";
  EXPECT_EQ(refusal_path(fp32), "/scenario/training/precision");
  Plan remainders = executed_plan();  // since 2026-12-02: the master as the parameters' 16-bit remainders
  remainders.scenario.training.optimizer_precision.store_param_remainders = true;
  EXPECT_EQ(refusal_path(remainders), "");
}

TEST(PlanCheck, RefusesFamilyPlansAndModelsTheExecutorDoesNotRun) {
  Plan family = executed_plan();
  family.document["family_plan"] = {{"family", "pipelined"}};
  EXPECT_EQ(refusal_path(family), "/family_plan/family");
  family.document["family_plan"] = {{"family", "heterogeneous"}};  // read back, but this one has no detail
  EXPECT_EQ(refusal_path(family), "/family_plan");
  family.document["family_plan"] = {{"family", "per-layer"}};  // read back, but this one has no detail
  EXPECT_EQ(refusal_path(family), "/family_plan");
  Plan dropout = executed_plan();  // hidden and attention dropout run (since 2026-11-30)
  dropout.scenario.model.hidden_dropout = 0.1;
  EXPECT_EQ(refusal_path(dropout), "");
  dropout.scenario.model.attention_dropout = 0.1;
  EXPECT_EQ(refusal_path(dropout), "");
}

// Gemma's GeGLU, post norms and soft-capped logits and Nemotron's squared ReLU run (2026-11-29); post norms at TP 1
// only, with FP8 linears too since 2026-12-06.
TEST(PlanCheck, RunsGemmaAndNemotronFeatures) {
  Plan gemma = executed_plan();
  gemma.scenario.model.activation = Activation::geglu;
  gemma.scenario.model.post_norms = true;
  gemma.scenario.model.final_logit_softcap = 30;
  EXPECT_EQ(refusal_path(gemma), "");
  Plan squared_relu = executed_plan();
  squared_relu.scenario.model.activation = Activation::squared_relu;
  EXPECT_EQ(refusal_path(squared_relu), "");
  Plan fp8 = gemma;
  fp8.scenario.training.fp8 = Fp8Config{Fp8Format::hybrid, Fp8Recipe::tensorwise};
  EXPECT_EQ(refusal_path(fp8), "");
  Plan tensor_parallel = gemma;
  tensor_parallel.strategy.tensor_model_parallel_size = 2;
  EXPECT_EQ(refusal_path(tensor_parallel), "/scenario/model/post_norms");
}

// GPT-style: LayerNorm, linear biases and learned positions run (issue 42), over TP with SP, stages and ZeRO too;
// a sequence longer than the position table is refused at its own key.
TEST(PlanCheck, RunsGptStyleModels) {
  Plan gpt = executed_plan();
  ModelConfig& m = gpt.scenario.model;
  m.normalization = Normalization::layernorm;
  m.add_bias_linear = true;
  m.position_embedding_rope = false;
  m.max_position_embeddings = gpt.scenario.training.seq_length;
  EXPECT_EQ(refusal_path(gpt), "");
  gpt.scenario.cluster.node_groups.front().gpus_per_node = 4;
  gpt.strategy.tensor_model_parallel_size = 2;
  gpt.strategy.sequence_parallel = true;
  gpt.strategy.pipeline_model_parallel_size = 2;
  gpt.strategy.zero_stage = 1;
  EXPECT_EQ(refusal_path(gpt), "");
  m.max_position_embeddings = gpt.scenario.training.seq_length / 2;
  EXPECT_EQ(refusal_path(gpt), "/scenario/training/seq_length");
}

TEST(PlanCheck, RunsTiedEmbeddingsShardedOverStagesAndDataRanks) {
  Plan tied = executed_plan();
  tied.scenario.model.untie_embeddings_and_output_weights = false;
  EXPECT_EQ(refusal_path(tied), "");
  tied.scenario.cluster.node_groups.front().gpus_per_node = 4;
  tied.strategy.pipeline_model_parallel_size = 2;
  tied.strategy.data_parallel_size = 2;
  tied.strategy.zero_stage = 1;
  EXPECT_EQ(refusal_path(tied), "");  // the table and its copy sharded alike (executor/parameters.cpp)
}

// Double strand runs on one stage (the two strands on two CUDA streams) and over stages.
TEST(PlanCheck, RunsDoubleStrandOnOneStageAndOverStages) {
  Plan strands = executed_plan();
  strands.strategy.schedule = Schedule::double_strand;
  EXPECT_EQ(refusal_path(strands), "");
  strands.scenario.cluster.node_groups.front().gpus_per_node = 2;
  strands.strategy.pipeline_model_parallel_size = 2;
  EXPECT_EQ(refusal_path(strands), "");  // the folded pipeline (each pass's transfer carries both strands')
}

TEST(PlanCheck, RefusesAPlanThatDoesNotFit) {
  Plan plan = executed_plan();
  plan.scenario.cluster.node_groups.front().gpu.memory_GiB = 1;
  EXPECT_EQ(refusal_path(plan), "/strategy");
}

// A hot-switching plan runs (each phase a class); its phases' refusals point into family_plan.detail; a phase
// in another layout is switched into (executor/resharding.hpp).
TEST(PlanCheck, RunsHotSwitchingPhasesOfOneOrSeveralLayouts) {
  const nlohmann::json document = testing::plan_document(testing::one_gpu_scenario(), "hot-switch:");
  const Plan plan = parse_plan(document, kFile);
  EXPECT_EQ(refusal_path(plan), "");
  Plan small = plan;
  small.scenario.cluster.node_groups.front().gpu.memory_GiB = 1;
  EXPECT_EQ(refusal_path(small), "/family_plan/detail/phases/0/strategy_fields");
  // The second phase at ZeRO 1: another layout of the gradients, switched into and out of.
  Plan other = plan;
  other.document["family_plan"]["detail"]["phases"][1]["strategy_fields"]["zero_stage"] = 1;
  other.document["family_plan"]["detail"]["phases"][1]["strategy"] =
      other.document["family_plan"]["detail"]["phases"][1]["strategy"].get<std::string>().replace(
          other.document["family_plan"]["detail"]["phases"][1]["strategy"].get<std::string>().find(".z0."), 4, ".z1.");
  other.document["family_plan"]["detail"]["home"] = other.document["family_plan"]["detail"]["phases"][1]["strategy"];
  EXPECT_EQ(refusal_path(other), "");
  // Aux-loss-free balancing keeps its biases per runtime, one per phase: refused where the phases would need one.
  Plan biased = plan;
  MoeConfig& moe = biased.scenario.model.moe;
  moe.num_experts = 4;
  moe.top_k = 2;
  moe.ffn_hidden_size = biased.scenario.model.ffn_hidden_size;
  moe.router_score_function = RouterScore::sigmoid;
  moe.router_expert_bias = true;
  EXPECT_EQ(refusal_path(biased), "/scenario/model/moe/router_expert_bias");
}

// The plan of a per-layer plan pinned on the recorded run's model over 4 GPUs (by default 2 stages of 2, split
// 1 + 3, micro-batches of 2 sequences): what twin simulate writes for it.
nlohmann::json pinned_plan_json(const std::vector<LayerStrategy>& layers, bool tied = false, int stages = 2,
                                std::vector<int> split = {1, 3}) {
  nlohmann::json doc = to_json(executed_plan().scenario);  // 4 layers, global batch 8
  doc["cluster"]["nodes"][0]["gpus_per_node"] = 4;
  doc["model"]["untie_embeddings_and_output_weights"] = !tied;
  const PerLayerPlan plan = testing::per_layer_plan(stages, 2, 4, std::move(split), layers);
  doc["strategy"] = {{"per_layer", plan.to_json()}};
  const Scenario scenario = parse_scenario(doc, "pinned.json");
  const std::vector<Candidate> ranked = per_layer_candidates(scenario, builtin_profile());
  EXPECT_EQ(ranked.size(), 1u);
  IterationGraph graph;
  Candidate detailed = ranked.at(0).plan->evaluate(scenario, builtin_profile(), true, &graph);
  detailed.memory = ranked[0].memory;
  return best_plan_json(scenario, detailed, graph);
}

// A per-layer plan runs its layers each in its own layout (Megatron TP or Ulysses), ZeRO stage and recompute,
// split unevenly, the embedding and output layer beside a Ulysses layer on each GPU's shard of its Ulysses block
// (part of a sequence where the block holds fewer samples than GPUs). Refused: with tied embeddings over stages, an
// output layer sharded unlike the table (their gradients are summed shard by shard).
TEST(PlanCheck, RunsPerLayerPlansOfTheirOwnLayouts) {
  const LayerStrategy tp2{{2, false}, 0, Recompute::none}, tp1_zero1_full{{1, false}, 1, Recompute::full};
  const LayerStrategy tp1_selective{{1, false}, 0, Recompute::selective}, ulysses2{{2, true}, 3, Recompute::none};
  const LayerStrategy ulysses4{{4, true}, 0, Recompute::none};
  EXPECT_EQ(refusal_path(parse_plan(pinned_plan_json({tp2, tp1_zero1_full, tp2, tp1_selective}), kFile)), "");
  EXPECT_EQ(refusal_path(parse_plan(pinned_plan_json({tp2, tp1_zero1_full, ulysses2, tp2}), kFile)), "");
  EXPECT_EQ(refusal_path(parse_plan(pinned_plan_json({ulysses2, tp1_zero1_full, ulysses2, ulysses2}), kFile)), "");
  // One stage of 4 GPUs, 2 sequences per micro-batch: the embedding and output layer beside Ulysses 4 hold half a
  // sequence each.
  EXPECT_EQ(refusal_path(parse_plan(pinned_plan_json(std::vector<LayerStrategy>(4, ulysses4), false, 1, {4}), kFile)),
            "");
  EXPECT_EQ(refusal_path(parse_plan(pinned_plan_json({tp2, tp1_zero1_full, tp2, tp2}, true), kFile)), "");
  EXPECT_EQ(refusal_path(parse_plan(pinned_plan_json({tp2, tp1_zero1_full, tp2, tp1_selective}, true), kFile)),
            "/family_plan/detail/layers/3");
}

// Sinks under a per-layer plan: the executor holds them by a layer's TP shard of heads, so a Ulysses layer of a
// model with sinks is refused at its layout; Megatron layouts pass.
TEST(PlanCheck, RefusesUlyssesLayersWithAttentionSinks) {
  const LayerStrategy tp2{{2, false}, 0, Recompute::none}, ulysses2{{2, true}, 0, Recompute::none};
  const LayerStrategy data{{1, false}, 1, Recompute::none};
  Plan megatron = parse_plan(pinned_plan_json({tp2, data, tp2, tp2}), kFile);
  megatron.scenario.model.attention_sinks = true;
  EXPECT_EQ(refusal_path(megatron), "");
  Plan ulysses = parse_plan(pinned_plan_json({tp2, data, ulysses2, tp2}), kFile);
  ulysses.scenario.model.attention_sinks = true;
  EXPECT_EQ(refusal_path(ulysses), "/family_plan/detail/layers/2/layout");
}

// Hidden dropout under a per-layer plan: its Ulysses layers failed on two H200s (2026-11-30 03:44 UTC), so the plan
// check refuses a Ulysses layer with it, at the layer's layout; Megatron layouts pass.
TEST(PlanCheck, RunsUlyssesAndMegatronLayersWithHiddenDropout) {
  const LayerStrategy tp2{{2, false}, 0, Recompute::none}, ulysses2{{2, true}, 0, Recompute::none};
  const LayerStrategy data{{1, false}, 1, Recompute::none};
  for (const auto& layers : {std::vector<LayerStrategy>{tp2, data, tp2, tp2},
                             std::vector<LayerStrategy>{ulysses2, tp2, data, ulysses2}}) {
    Plan plan = parse_plan(pinned_plan_json(layers), kFile);
    plan.scenario.model.hidden_dropout = 0.1;
    EXPECT_EQ(refusal_path(plan), "");
  }
}

// An asymmetric plan as twin simulate writes it for a scenario pinning it (strategy.pipelines).
Plan asymmetric_plan_file(const Scenario& scenario) {
  IterationGraph graph;
  Candidate candidate = evaluate_asymmetric_plan(scenario, builtin_profile(), *scenario.strategy, scenario.pipelines,
                                                 true, &graph);
  return parse_plan(best_plan_json(scenario, candidate, graph), kFile);
}

// Asymmetric plans run at ZeRO 0 and 1; refused: a tied table over stages, a plan that does not fit, a key that is
// not its detail's.
TEST(PlanCheck, RunsAsymmetricPlans) {
  EXPECT_EQ(refusal_path(asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true))), "");
  EXPECT_EQ(refusal_path(asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2ToTp1BesideTp1, false))), "");
  EXPECT_EQ(refusal_path(asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true, 1))), "");
  Plan tied = asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true));
  tied.scenario.model.untie_embeddings_and_output_weights = false;  // the pipelines are read against it
  EXPECT_EQ(refusal_path(tied), "/family_plan/detail/pipelines/1/stages");
  Plan small = asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true));
  small.scenario.cluster.node_groups.front().gpu.memory_GiB = 0.5;
  EXPECT_EQ(refusal_path(small), "/family_plan/detail");
  Plan renamed = asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true));
  renamed.document["family_plan"]["key"] = "hetero.other";
  EXPECT_EQ(refusal_path(renamed), "/family_plan/key");
  // The detail is read as a scenario's strategy.pipelines is, each error at its path.
  Plan edited = asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true));
  edited.document["family_plan"]["detail"]["zero_stage"] = 2;
  EXPECT_EQ(refusal_path(edited), "/family_plan/detail/zero_stage");
  edited = asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true));
  edited.document["family_plan"]["detail"]["pipelines"][1]["stages"][1]["devices"] = {1};
  EXPECT_EQ(refusal_path(edited), "/family_plan/detail/pipelines/1/stages/1/devices");
  edited = asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true));
  edited.document["family_plan"]["detail"]["sequence_parallel"] = false;  // not the file's strategy's
  EXPECT_EQ(refusal_path(edited), "/family_plan/detail");
  edited = asymmetric_plan_file(testing::asymmetric_scenario(testing::kTp2BesidePp2, true));
  edited.document["family_plan"]["detail"]["stages"] = 2;
  EXPECT_EQ(refusal_path(edited), "/family_plan/detail/stages");  // an unknown key
}

// An asymmetric plan's file states no TP size in its strategy (strategy.pipelines): the model's variants that run at
// TP 1 only are checked on every stage. Here pipeline 0 runs at TP 1, pipeline 1 at TP 2.
TEST(PlanCheck, PostNormsUnderEveryStageOfAnAsymmetricPlan) {
  const char* pp2_beside_tp2 = R"([
    { "micro_batch_size": 1, "num_micro_batches": 4,
      "stages": [ { "devices": [0], "num_layers": 2 }, { "devices": [1], "num_layers": 2 } ] },
    { "micro_batch_size": 1, "num_micro_batches": 4,
      "stages": [ { "devices": [2, 3], "tensor_model_parallel_size": 2, "num_layers": 4 } ] } ])";
  Plan plan = asymmetric_plan_file(testing::asymmetric_scenario(pp2_beside_tp2, true));
  EXPECT_EQ(plan.document.at("strategy").count("tensor_model_parallel_size"), 0u);
  EXPECT_EQ(refusal_path(plan), "");
  plan.scenario.model.post_norms = true;
  EXPECT_EQ(refusal_path(plan), "/scenario/model/post_norms");
}

}  // namespace
}  // namespace twin::exec

namespace twin::exec {
namespace {

// Multi-latent attention runs at TP 1 and CP 1; under either it is refused at its key, before the plan is lowered.
TEST(PlanCheck, MlaRunsAtTpAndCpOneOnly) {
  Plan plan = executed_plan();
  plan.scenario.model.mla = MlaConfig{64, 32, 32, 16, 32};
  for (const auto& [tp, cp] : {std::pair{2, 1}, std::pair{1, 2}}) {
    Plan split = plan;
    split.strategy.tensor_model_parallel_size = tp;
    split.strategy.context_parallel_size = cp;
    EXPECT_EQ(refusal_path(split), "/scenario/model/mla") << "tp " << tp << " cp " << cp;
  }
}

// The executor exchanges experts' tokens by all-to-all: a plan priced with the allgather or flex dispatcher is
// refused where tokens are exchanged (EP > 1), not run as another dispatcher.
TEST(PlanCheck, RefusesDispatchersOtherThanTheAllToAllUnderExpertParallelism) {
  for (const MoeTokenDispatcher dispatcher : {MoeTokenDispatcher::allgather, MoeTokenDispatcher::flex}) {
    Plan plan = executed_plan();
    plan.scenario.framework.moe_token_dispatcher_type = dispatcher;
    EXPECT_EQ(refusal_path(plan), "");  // one rank holds every expert: nothing is exchanged
    plan.strategy.expert_model_parallel_size = 2;
    EXPECT_EQ(refusal_path(plan), "/scenario/framework/moe_token_dispatcher_type");
  }
}

// The executed plan's model with 4 experts of its FFN width, top-2, in every layer.
Plan executed_moe_plan() {
  Plan plan = executed_plan();
  MoeConfig& moe = plan.scenario.model.moe;
  moe.num_experts = 4;
  moe.top_k = 2;
  moe.ffn_hidden_size = plan.scenario.model.ffn_hidden_size;
  EXPECT_TRUE(plan.scenario.model.is_moe());
  return plan;
}

// Shared experts run at TP 1 only (their input gradient joins the routed experts' before any TP reduction): a plan
// with them under TP is refused at their key by the plan check, which the simulator's executable verdict runs, not
// first by the parameter layout at the start of twin execute (a DeepSeekMoE-shaped study's TP 2 plans, 2026-11-30).
TEST(PlanCheck, RefusesSharedExpertsUnderTensorParallelism) {
  Plan plan = executed_moe_plan();
  plan.scenario.model.moe.shared_expert_ffn_hidden_size = 2 * plan.scenario.model.moe.ffn_hidden_size;
  EXPECT_EQ(refusal_path(plan), "");
  plan.strategy.tensor_model_parallel_size = 2;
  plan.strategy.sequence_parallel = true;
  EXPECT_EQ(refusal_path(plan), "/scenario/model/moe/shared_expert_ffn_hidden_size");
}

// Megatron-Core's experts' eager clamp and FC2 bias are priced for that framework only (strategies/
// megatron_expert_passes.hpp): such a plan is refused at the framework's name, and runs under twin's own.
TEST(PlanCheck, RefusesMegatronsEagerExpertPasses) {
  Plan plan = executed_moe_plan();
  plan.scenario.model.add_bias_linear = true;
  plan.scenario.framework.name = FrameworkName::megatron_core;
  EXPECT_EQ(refusal_path(plan), "/scenario/framework/name");
  plan.scenario.framework.name = FrameworkName::twin;
  EXPECT_EQ(refusal_path(plan), "");
}

// An expert capacity runs on one EP rank (its drop before the dispatch is not checked under EP on GPUs): refused
// at its key under EP, run at EP 1, padded or not.
TEST(PlanCheck, RunsAnExpertCapacityOnOneExpertParallelRank) {
  Plan plan = executed_moe_plan();
  plan.scenario.model.moe.expert_capacity_factor = 1.0;
  EXPECT_EQ(refusal_path(plan), "");
  plan.scenario.model.moe.pad_expert_input_to_capacity = true;
  EXPECT_EQ(refusal_path(plan), "");
  plan.scenario.cluster.node_groups.front().gpus_per_node = 2;
  plan.strategy.expert_model_parallel_size = 2;
  plan.strategy.data_parallel_size = 2;
  EXPECT_EQ(refusal_path(plan), "/scenario/model/moe/expert_capacity_factor");
}

// The executor sends one block per (peer, local expert): a plan whose framework's exchange the lowering says goes in
// one block per peer (Megatron-Core's all_to_all_single) is refused at the framework's name under EP, and runs at EP 1,
// where nothing is exchanged.
TEST(PlanCheck, RefusesAnExchangeInOtherBlocksThanTheExecutors) {
  Plan plan = executed_moe_plan();
  plan.scenario.cluster.node_groups.front().gpus_per_node = 2;
  plan.strategy.data_parallel_size = 2;
  plan.strategy.expert_model_parallel_size = 2;
  EXPECT_EQ(refusal_path(plan), "");
  plan.scenario.framework.name = FrameworkName::megatron_core;
  EXPECT_EQ(refusal_path(plan), "/scenario/framework/name");
  plan.strategy.expert_model_parallel_size = 1;
  EXPECT_EQ(refusal_path(plan), "");
}

// A pinned strategy is held to the search's rules (strategies/validity.hpp), refused at the plan's strategy with the
// rule it breaks: here the key-value groups TP must divide (Megatron-Core's num_query_groups_per_partition), which
// the parameter layout no longer states a second time.
TEST(PlanCheck, RefusesAStrategyTheSearchWouldNotOffer) {
  Plan plan = executed_plan();
  plan.scenario.cluster.node_groups.front().gpus_per_node = 4;
  plan.strategy.tensor_model_parallel_size = 4;
  plan.strategy.sequence_parallel = true;
  ASSERT_EQ(plan.scenario.model.num_query_groups, 4);
  EXPECT_EQ(refusal_path(plan), "");
  plan.scenario.model.num_query_groups = 2;  // 16 heads over TP 4, but two key-value groups
  EXPECT_EQ(refusal_path(plan), "/strategy");
  try {
    check_executable_plan(plan, kFile);
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("num_query_groups 2 not divisible by tensor_model_parallel_size 4"),
              std::string::npos)
        << error.what();
  }
}

// Expert TP is priced by the simulator only: twin execute refuses it at its key, whole experts run.
TEST(PlanCheck, RefusesExpertTensorParallelism) {
  Plan plan = executed_plan();
  plan.strategy.expert_tensor_parallel_size = 2;
  EXPECT_EQ(refusal_path(plan), "/strategy/expert_tensor_parallel_size");
}

}  // namespace
}  // namespace twin::exec

namespace twin::exec {
namespace {

// A stated pipeline layout is priced by the simulator only: twin execute refuses it at its key.
TEST(PlanCheck, RefusesAStatedPipelineLayout) {
  Plan plan = executed_plan();
  std::string error;
  const PipelineLayout whole =
      *parse_pipeline_layout("Et*" + std::to_string(plan.scenario.model.num_layers) + "L", error);
  plan.strategy.pipeline_model_parallel_layout = whole;
  if (plan.scenario.strategy) plan.scenario.strategy->pipeline_model_parallel_layout = whole;
  EXPECT_EQ(refusal_path(plan), "/strategy/pipeline_model_parallel_layout");
}

}  // namespace
}  // namespace twin::exec

namespace twin::exec {
namespace {

// Selective recompute's modules: a dense layer's layernorm and mlp run at TP 1 (executor/gpu/dense_block_recompute.cpp),
// the others are priced by the simulator only and refused at their key, as are layernorm and mlp beside residual fusion.
TEST(PlanCheck, RunsTheDenseRecomputeModulesAndRefusesTheOthers) {
  const auto with = [](std::vector<RecomputeModule> modules, bool residual_fusion = false) {
    Plan plan = executed_plan();
    plan.strategy.recompute = Recompute::selective;
    plan.strategy.recompute_modules = std::move(modules);
    if (plan.scenario.strategy) {
      plan.scenario.strategy->recompute = Recompute::selective;
      plan.scenario.strategy->recompute_modules = plan.strategy.recompute_modules;
    }
    plan.scenario.framework.residual_fusion = residual_fusion;
    return refusal_path(plan);
  };
  ASSERT_EQ(executed_plan().strategy.tensor_model_parallel_size, 1);
  EXPECT_EQ(with({RecomputeModule::layernorm}), "");
  EXPECT_EQ(with({RecomputeModule::core_attn, RecomputeModule::layernorm, RecomputeModule::mlp}), "");
  EXPECT_EQ(with({RecomputeModule::moe_act}), "/strategy/recompute_modules");
  EXPECT_EQ(with({RecomputeModule::mla_up_proj}), "/strategy/recompute_modules");
  EXPECT_EQ(with({RecomputeModule::mlp}, true), "/strategy/recompute_modules");
  EXPECT_EQ(with({RecomputeModule::core_attn}, true), "");
}

}  // namespace
}  // namespace twin::exec
