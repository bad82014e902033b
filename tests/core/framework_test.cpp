// The scenario's framework section: Megatron-LM's recipe as defaults, each switch read and written back,
// use_distributed_optimizer against zero_stage, attention_backend in either place, and bad values named by path.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"

namespace twin {
namespace {

using nlohmann::json;

json framework_scenario() {
  return json::parse(R"({
    "name": "t",
    "model": {"preset": "llama2-7b"},
    "training": {"seq_length": 4096, "global_batch_size": 64},
    "cluster": {"nodes": [{"count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8}]}
  })");
}

std::string error_path(const json& document) {
  try {
    parse_scenario(document, "s.json");
  } catch (const InputError& e) {
    return e.json_path() + " | " + e.what();
  }
  return "no error";
}

TEST(Framework, DefaultsAreMegatronsRecipe) {
  const Scenario s = parse_scenario(framework_scenario(), "s.json");
  EXPECT_TRUE(s.framework.overlap_grad_reduce);
  EXPECT_TRUE(s.framework.overlap_param_gather);
  EXPECT_FALSE(s.framework.tp_comm_overlap);
  EXPECT_TRUE(s.framework.gradient_accumulation_fusion);
  EXPECT_TRUE(s.framework.cross_entropy_loss_fusion);
  EXPECT_FALSE(s.framework.residual_fusion);  // twin's own: Megatron adds each residual in a kernel of its own
  EXPECT_FALSE(s.framework.use_distributed_optimizer.has_value());
  EXPECT_EQ(s.model.attention_backend, AttentionBackend::flash);
  EXPECT_EQ(s.framework.cp_comm_type, CpCommType::p2p);
  EXPECT_EQ(s.framework.zero_implementation, ZeroImplementation::megatron);
  EXPECT_FALSE(to_json(s)["framework"].contains("zero_implementation"));  // the default keeps plans' bytes
  EXPECT_FALSE(s.framework.scatter_gather_tensors_in_pipeline);  // Megatron-Core sends whole pipeline tensors
  EXPECT_FALSE(to_json(s)["framework"].contains("scatter_gather_tensors_in_pipeline"));
  EXPECT_FALSE(s.framework.deepspeed_bf16_optimizer);  // Megatron's optimizers
  EXPECT_FALSE(to_json(s)["framework"].contains("deepspeed_bf16_optimizer"));
  EXPECT_FALSE(s.profile_scaling);
}

TEST(Framework, EverySwitchRoundTrips) {
  json d = framework_scenario();
  d["framework"] = {{"overlap_grad_reduce", false},        {"overlap_param_gather", false},
                    {"tp_comm_overlap", true},             {"gradient_accumulation_fusion", false},
                    {"cross_entropy_loss_fusion", false},  {"use_distributed_optimizer", true},
                    {"residual_fusion", true},
                    {"attention_backend", "fused"},        {"cp_comm_type", "all_gather"},
                    {"zero_implementation", "deepspeed"},  {"scatter_gather_tensors_in_pipeline", true},
                    {"deepspeed_bf16_optimizer", true}};
  d["profile_scaling"] = true;
  const Scenario s = parse_scenario(d, "s.json");
  EXPECT_FALSE(s.framework.overlap_grad_reduce);
  EXPECT_FALSE(s.framework.overlap_param_gather);
  EXPECT_TRUE(s.framework.tp_comm_overlap);
  EXPECT_FALSE(s.framework.gradient_accumulation_fusion);
  EXPECT_FALSE(s.framework.cross_entropy_loss_fusion);
  EXPECT_TRUE(s.framework.residual_fusion);
  EXPECT_EQ(s.framework.use_distributed_optimizer, true);
  EXPECT_EQ(s.model.attention_backend, AttentionBackend::fused);
  EXPECT_EQ(s.framework.cp_comm_type, CpCommType::all_gather);
  EXPECT_EQ(s.framework.zero_implementation, ZeroImplementation::deepspeed);
  EXPECT_TRUE(s.framework.scatter_gather_tensors_in_pipeline);
  EXPECT_TRUE(s.framework.deepspeed_bf16_optimizer);
  EXPECT_EQ(s.search.zero_stage, std::vector<int>{1});  // the distributed optimizer is ZeRO 1
  EXPECT_TRUE(s.profile_scaling);
  EXPECT_EQ(parse_scenario(to_json(s), s.source), s);
}

TEST(Framework, DistributedOptimizerMustAgreeWithTheStrategy) {
  json d = framework_scenario();
  d["framework"] = {{"use_distributed_optimizer", true}};
  d["strategy"] = {{"tensor_model_parallel_size", 1}, {"zero_stage", 0}};
  EXPECT_NE(error_path(d).find("/framework/use_distributed_optimizer | "), std::string::npos) << error_path(d);
  EXPECT_NE(error_path(d).find("means zero_stage 1, but the strategy pins zero_stage 0"), std::string::npos);
  d.erase("strategy");
  d["search"] = {{"zero_stage", {0, 3}}};
  EXPECT_NE(error_path(d).find("which search.zero_stage does not list"), std::string::npos) << error_path(d);
  d["framework"]["use_distributed_optimizer"] = false;
  EXPECT_EQ(parse_scenario(d, "s.json").search.zero_stage, std::vector<int>{0});
}

TEST(Framework, DeepSpeedBf16OptimizerNeedsWhatItRanUnder) {
  // bf16, both overlaps off, ZeRO stage 1 (its own sharding of the optimizer states), a dense model, DeepSpeed.
  json d = framework_scenario();
  d["framework"] = {{"overlap_grad_reduce", false}, {"overlap_param_gather", false}, {"deepspeed_bf16_optimizer", true}};
  d["search"] = {{"zero_stage", {0, 1}}};
  EXPECT_EQ(parse_scenario(d, "s.json").search.zero_stage, std::vector<int>{1});
  const auto refused = [](const json& doc, const std::string& says) {
    const std::string error = error_path(doc);
    EXPECT_EQ(error.rfind("/framework/deepspeed_bf16_optimizer | ", 0), 0u) << error;
    EXPECT_NE(error.find(says), std::string::npos) << error;
  };
  json bad = d;
  bad["framework"]["deepspeed_bf16_optimizer"] = "yes";
  EXPECT_EQ(error_path(bad).rfind("/framework/deepspeed_bf16_optimizer | ", 0), 0u) << error_path(bad);
  bad = d;
  bad["training"]["precision"] = "fp16";
  refused(bad, "training.precision \"bf16\"");
  bad = d;
  bad["framework"]["overlap_grad_reduce"] = true;
  refused(bad, "overlap_grad_reduce and overlap_param_gather false");
  bad = d;
  bad["framework"].erase("overlap_param_gather");  // Megatron's recipe default: on
  refused(bad, "overlap_grad_reduce and overlap_param_gather false");
  bad = d;
  bad["search"] = {{"zero_stage", {0, 3}}};
  refused(bad, "search.zero_stage listing 1");
  bad = d;
  bad.erase("search");
  bad["strategy"] = {{"tensor_model_parallel_size", 8}, {"zero_stage", 0}};
  refused(bad, "strategy.zero_stage 1");
  bad = d;
  bad["model"] = {{"preset", "mixtral-8x7b"}};
  refused(bad, "a dense model");
}

TEST(Framework, DeferredEmbeddingWgradIsRefusedWhereMegatronOrTwinDoesNotDeferIt) {
  json d = framework_scenario();
  d["framework"] = {{"defer_embedding_wgrad_compute", true}, {"wgrad_deferral_limit", 22}};
  const Scenario s = parse_scenario(d, "s.json");
  EXPECT_TRUE(s.framework.defer_embedding_wgrad_compute);
  EXPECT_EQ(s.framework.wgrad_deferral_limit, 22);
  EXPECT_EQ(to_json(s)["framework"]["wgrad_deferral_limit"], 22);
  EXPECT_EQ(parse_scenario(to_json(s), "again.json").framework, s.framework);
  EXPECT_FALSE(to_json(parse_scenario(framework_scenario(), "s.json"))["framework"].contains("wgrad_deferral_limit"));
  // Deferred: the first `limit` micro-batches, every one under 0, none without pipeline parallelism.
  EXPECT_EQ(deferred_output_wgrad_micro_batches(s.framework, 4, 64), 22);
  EXPECT_EQ(deferred_output_wgrad_micro_batches(s.framework, 4, 8), 8);
  EXPECT_EQ(deferred_output_wgrad_micro_batches(s.framework, 1, 64), 0);
  FrameworkConfig every = s.framework;
  every.wgrad_deferral_limit = 0;
  EXPECT_EQ(deferred_output_wgrad_micro_batches(every, 2, 64), 64);
  EXPECT_EQ(deferred_output_wgrad_micro_batches(FrameworkConfig{}, 2, 64), 0);

  const auto refused = [](const json& doc, const std::string& at, const std::string& says) {
    const std::string error = error_path(doc);
    EXPECT_EQ(error.rfind(at + " | ", 0), 0u) << error;
    EXPECT_NE(error.find(says), std::string::npos) << error;
  };
  json bad = d;
  bad["framework"]["wgrad_deferral_limit"] = -1;
  refused(bad, "/framework/wgrad_deferral_limit", "got -1");
  bad["framework"] = {{"wgrad_deferral_limit", 4}};
  refused(bad, "/framework/wgrad_deferral_limit", "defer_embedding_wgrad_compute true beside it");
  bad["framework"] = {{"defer_embedding_wgrad_compute", true}, {"gradient_accumulation_fusion", false}};
  refused(bad, "/framework/defer_embedding_wgrad_compute", "gradient_accumulation_fusion true");
  bad["framework"] = {{"defer_embedding_wgrad_compute", true}, {"name", "pytorch-fsdp2"}};
  refused(bad, "/framework/defer_embedding_wgrad_compute", "other than pytorch-fsdp2");
  bad = d;
  bad["model"]["mtp_num_layers"] = 1;
  refused(bad, "/framework/defer_embedding_wgrad_compute", "without multi-token prediction");
  bad = d;
  bad["strategy"] = {{"tensor_model_parallel_size", 8}};
  refused(bad, "/framework/defer_embedding_wgrad_compute", "needs pipeline parallelism");
  bad["strategy"] = {{"tensor_model_parallel_size", 4}, {"pipeline_model_parallel_size", 2}, {"schedule", "double-strand"}};
  refused(bad, "/framework/defer_embedding_wgrad_compute", "Megatron's schedules");
  bad.erase("strategy");
  bad["search"] = {{"schedule", {"1f1b", "double-strand"}}};
  refused(bad, "/framework/defer_embedding_wgrad_compute", "Megatron's schedules");
  bad["search"] = {{"per_layer", true}};
  refused(bad, "/framework/defer_embedding_wgrad_compute", "uniform strategies");
  bad = d;
  bad["strategy"] = {{"tensor_model_parallel_size", 4}, {"pipeline_model_parallel_size", 2}};
  EXPECT_EQ(error_path(bad), "no error");
}

TEST(Framework, BadValuesNameTheirPath) {
  json d = framework_scenario();
  d["framework"] = {{"overlap_grad_reduce", "yes"}};
  EXPECT_EQ(error_path(d).rfind("/framework/overlap_grad_reduce | ", 0), 0u) << error_path(d);
  d["framework"] = {{"overlap_grad_reduces", true}};
  EXPECT_NE(error_path(d).find("did you mean 'overlap_grad_reduce'"), std::string::npos) << error_path(d);
  d["framework"] = {{"attention_backend", "sdpa"}};
  EXPECT_NE(error_path(d).find("flash, fused, unfused"), std::string::npos) << error_path(d);
  d["framework"] = {{"cp_comm_type", "a2a"}};
  EXPECT_EQ(error_path(d).rfind("/framework/cp_comm_type | ", 0), 0u) << error_path(d);
  EXPECT_NE(error_path(d).find("p2p, all_gather"), std::string::npos) << error_path(d);
  d["framework"] = {{"scatter_gather_tensors_in_pipeline", 1}};
  EXPECT_EQ(error_path(d).rfind("/framework/scatter_gather_tensors_in_pipeline | ", 0), 0u) << error_path(d);
  d["framework"] = {{"zero_implementation", "fsdp"}};
  EXPECT_EQ(error_path(d).rfind("/framework/zero_implementation | ", 0), 0u) << error_path(d);
  EXPECT_NE(error_path(d).find("megatron, deepspeed"), std::string::npos) << error_path(d);
  d["framework"] = {{"attention_backend", "fused"}};
  d["model"]["attention_backend"] = "unfused";
  EXPECT_EQ(error_path(d).rfind("/framework/attention_backend | ", 0), 0u) << error_path(d);
  d["model"]["attention_backend"] = "fused";
  EXPECT_EQ(parse_scenario(d, "s.json").model.attention_backend, AttentionBackend::fused);
  d = framework_scenario();  // PyTorch FSDP2's own settings beside another framework, or a dtype it has not
  d["framework"] = {{"compile", true}};
  EXPECT_EQ(error_path(d).rfind("/framework/compile | ", 0), 0u) << error_path(d);
  EXPECT_NE(error_path(d).find("pytorch-fsdp2"), std::string::npos) << error_path(d);
  d["framework"] = {{"name", "pytorch-fsdp2"}, {"reduce_dtype", "float16"}};
  EXPECT_NE(error_path(d).find("float32, bfloat16"), std::string::npos) << error_path(d);
  d["framework"] = {{"name", "pytorch-fsdp2"}, {"compile", true}, {"reshard_after_forward", false},
                    {"reduce_dtype", "bfloat16"}};
  const Scenario fsdp2 = parse_scenario(d, "s.json");
  EXPECT_TRUE(fsdp2.framework.compile);
  EXPECT_FALSE(fsdp2.framework.reshard_after_forward);
  EXPECT_FALSE(fsdp2.framework.transformer_engine_kernels);
  EXPECT_FALSE(to_json(fsdp2)["framework"].contains("transformer_engine_kernels"));  // the plans of before, same bytes
  d["framework"]["transformer_engine_kernels"] = true;
  const Scenario te = parse_scenario(d, "s.json");
  EXPECT_TRUE(te.framework.transformer_engine_kernels);
  EXPECT_EQ(parse_scenario(to_json(te), "s.json").framework, te.framework);
  d = framework_scenario();  // Transformer Engine's kernels as a setting of PyTorch's FSDP only
  d["framework"] = {{"name", "megatron-core"}, {"transformer_engine_kernels", true}};
  EXPECT_EQ(error_path(d).rfind("/framework/transformer_engine_kernels | ", 0), 0u) << error_path(d);
  EXPECT_EQ(fsdp2.framework.reduce_dtype_bytes, 2);
  EXPECT_EQ(gradient_reduce_bytes(fsdp2.framework), 2);
}

TEST(Framework, GradientReductionDtypeIsTheFrameworksUnlessStated) {
  json d = framework_scenario();  // no framework section: 16 bits, as twin execute reduces
  EXPECT_EQ(gradient_reduce_bytes(parse_scenario(d, "s.json").framework), 2);
  d["framework"] = {{"name", "pytorch-fsdp2"}};  // torchtitan's MixedPrecisionPolicy: float32
  EXPECT_EQ(gradient_reduce_bytes(parse_scenario(d, "s.json").framework), 4);
  d["framework"] = {{"name", "megatron-core"}, {"reduce_dtype", "float32"}};  // Megatron-LM's own bf16 default
  const Scenario megatron = parse_scenario(d, "s.json");
  EXPECT_EQ(gradient_reduce_bytes(megatron.framework), 4);
  EXPECT_EQ(to_json(megatron)["framework"]["reduce_dtype"], "float32");  // written where stated
  EXPECT_EQ(parse_scenario(to_json(megatron), "s.json").framework, megatron.framework);
  d["framework"] = {{"overlap_grad_reduce", true}};
  EXPECT_FALSE(to_json(parse_scenario(d, "s.json"))["framework"].contains("reduce_dtype"));
  d["framework"] = {{"reduce_dtype", "float16"}};
  EXPECT_EQ(error_path(d).rfind("/framework/reduce_dtype | ", 0), 0u) << error_path(d);
  d = framework_scenario();
  d["profile_scaling"] = "on";
  EXPECT_EQ(error_path(d).rfind("/profile_scaling | ", 0), 0u) << error_path(d);
}

// The main gradient (what weight gradients accumulate into) is the reduction's dtype, as Megatron's DDP allocates it,
// fp32 under DeepSpeed's BF16_Optimizer, or what the scenario states (NeMo 22.08's fp32 buffer beside a bf16 reduction).
TEST(Framework, MainGradientDtypeIsTheReductionsUnlessStated) {
  json d = framework_scenario();
  EXPECT_EQ(main_gradient_bytes(parse_scenario(d, "s.json").framework), 2);
  d["framework"] = {{"reduce_dtype", "float32"}};
  EXPECT_EQ(main_gradient_bytes(parse_scenario(d, "s.json").framework), 4);
  d["framework"] = {{"deepspeed_bf16_optimizer", true}, {"overlap_grad_reduce", false}, {"overlap_param_gather", false}};
  EXPECT_EQ(main_gradient_bytes(parse_scenario(d, "s.json").framework), 4);
  d["framework"] = {{"main_grad_dtype", "float32"}};
  const Scenario nemo = parse_scenario(d, "s.json");
  EXPECT_EQ(main_gradient_bytes(nemo.framework), 4);
  EXPECT_EQ(gradient_reduce_bytes(nemo.framework), 2);
  EXPECT_EQ(to_json(nemo)["framework"]["main_grad_dtype"], "float32");  // written where stated, and read back
  EXPECT_EQ(parse_scenario(to_json(nemo), "s.json").framework, nemo.framework);
  EXPECT_FALSE(to_json(parse_scenario(framework_scenario(), "s.json"))["framework"].contains("main_grad_dtype"));
  d["framework"] = {{"main_grad_dtype", "float16"}};
  EXPECT_EQ(error_path(d).rfind("/framework/main_grad_dtype | ", 0), 0u) << error_path(d);
}

// PyTorch's FSDP1 (pytorch-fsdp): FSDP2's settings beside it, written back; its gradients reduced in bf16 unless
// stated (FSDP1's MixedPrecision reduces in param_dtype), its checkpoint stopping early; Megatron's and DeepSpeed's
// settings refused beside it as beside pytorch-fsdp2.
TEST(Framework, PytorchFsdp1TakesFsdpSettingsAndReducesInBf16UnlessStated) {
  json d = framework_scenario();
  d["framework"] = {{"name", "pytorch-fsdp"}, {"compile", true}, {"reshard_after_forward", false}};
  const Scenario fsdp1 = parse_scenario(d, "s.json");
  EXPECT_EQ(fsdp1.framework.name, FrameworkName::pytorch_fsdp);
  EXPECT_TRUE(pytorch_fsdp(fsdp1.framework.name));
  EXPECT_TRUE(fsdp1.framework.compile);
  EXPECT_FALSE(fsdp1.framework.reshard_after_forward);
  EXPECT_EQ(gradient_reduce_bytes(fsdp1.framework), 2);
  EXPECT_TRUE(recompute_stops_early(fsdp1.framework));
  EXPECT_EQ(to_json(fsdp1)["framework"]["name"], "pytorch-fsdp");
  EXPECT_EQ(parse_scenario(to_json(fsdp1), "s.json").framework, fsdp1.framework);
  d["framework"] = {{"name", "pytorch-fsdp"}, {"reduce_dtype", "float32"}};
  EXPECT_EQ(gradient_reduce_bytes(parse_scenario(d, "s.json").framework), 4);
  d["framework"] = {{"name", "pytorch-fsdp"}, {"defer_embedding_wgrad_compute", true}};
  EXPECT_EQ(error_path(d).rfind("/framework/defer_embedding_wgrad_compute | ", 0), 0u) << error_path(d);
  d["framework"] = {{"name", "pytorch-fsdp1"}};
  EXPECT_NE(error_path(d).find("pytorch-fsdp"), std::string::npos) << error_path(d);
}

// Full recompute stops early where PyTorch's non-reentrant checkpoint runs it: pytorch-fsdp2's default, or as stated.
TEST(Framework, CheckpointEarlyStopIsPytorchFsdp2sUnlessStated) {
  json d = framework_scenario();
  EXPECT_FALSE(recompute_stops_early(parse_scenario(d, "s.json").framework));
  EXPECT_FALSE(to_json(parse_scenario(d, "s.json"))["framework"].contains("checkpoint_early_stop"));
  d["framework"] = {{"checkpoint_early_stop", true}};
  const Scenario stated = parse_scenario(d, "s.json");
  EXPECT_TRUE(recompute_stops_early(stated.framework));
  EXPECT_EQ(to_json(stated)["framework"]["checkpoint_early_stop"], true);  // written where stated, and read back
  EXPECT_EQ(parse_scenario(to_json(stated), "s.json").framework, stated.framework);
  d["framework"] = {{"name", "pytorch-fsdp2"}};
  EXPECT_TRUE(recompute_stops_early(parse_scenario(d, "s.json").framework));
  d["framework"] = {{"name", "pytorch-fsdp2"}, {"checkpoint_early_stop", false}};
  EXPECT_FALSE(recompute_stops_early(parse_scenario(d, "s.json").framework));
  d["framework"] = {{"checkpoint_early_stop", "yes"}};
  EXPECT_EQ(error_path(d).rfind("/framework/checkpoint_early_stop | ", 0), 0u) << error_path(d);
}

}  // namespace
}  // namespace twin
