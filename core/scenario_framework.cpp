#include "core/scenario_framework.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace twin {

using Reader = JsonReader;

namespace {

// defer_embedding_wgrad_compute and its limit, with what Megatron-Core's ModelParallelConfig.__post_init__ refuses
// beside them (gradient accumulation fusion off, a negative limit) and what twin does not model: a PyTorch FSDP2 run,
// and multi-token prediction, whose depths call the same output layer (each call would join the deferred ones).
void parse_deferred_embedding_wgrad(const Reader& r, const ModelConfig& model, FrameworkConfig& f) {
  if (auto x = r.find("defer_embedding_wgrad_compute")) {
    f.defer_embedding_wgrad_compute = x->boolean();
    if (f.defer_embedding_wgrad_compute && !f.gradient_accumulation_fusion)
      x->fail("gradient_accumulation_fusion true beside it (Megatron-Core refuses to defer without it)");
    if (f.defer_embedding_wgrad_compute && pytorch_fsdp(f.name))
      x->fail("a framework other than pytorch-fsdp2 and pytorch-fsdp (a setting of Megatron-Core)");
    if (f.defer_embedding_wgrad_compute && model.mtp_num_layers > 0)
      x->fail("a model without multi-token prediction (twin defers the main output layer's weight gradients only)");
  }
  if (auto x = r.find("wgrad_deferral_limit")) {
    if (!f.defer_embedding_wgrad_compute)
      x->fail("defer_embedding_wgrad_compute true beside it (the limit counts deferred micro-batches)");
    f.wgrad_deferral_limit = static_cast<int>(x->integer(0, 1 << 30));
  }
}

// The MoE dispatcher and Megatron's overlapped EP schedule with its delayed weight gradients.
void parse_expert_parallel(const Reader& r, FrameworkConfig& f) {
  if (auto x = r.find("moe_token_dispatcher_type")) {
    const std::string dispatcher = x->one_of({"alltoall", "allgather", "flex"}, "MoE token dispatcher");
    f.moe_token_dispatcher_type = dispatcher == "alltoall"    ? MoeTokenDispatcher::alltoall
                                  : dispatcher == "allgather" ? MoeTokenDispatcher::allgather
                                                              : MoeTokenDispatcher::flex;
  }
  if (auto x = r.find("overlap_moe_expert_parallel_comm")) f.overlap_moe_expert_parallel_comm = x->boolean();
  if (auto x = r.find("delay_wgrad_compute")) {
    f.delay_wgrad_compute = x->boolean();
    if (f.delay_wgrad_compute && !f.overlap_moe_expert_parallel_comm)
      x->fail("overlap_moe_expert_parallel_comm true beside it (twin models the delayed weight gradients only in "
              "Megatron's overlapped EP schedule)");
  }
}

// PyTorch FSDP's own settings (refused beside another framework) and the gradients' reduction and main dtypes.
void parse_pytorch_and_gradients(const Reader& r, FrameworkConfig& f) {
  for (const char* key : {"compile", "reshard_after_forward", "transformer_engine_kernels"})
    if (auto x = r.find(key); x && !pytorch_fsdp(f.name))
      x->fail("expected framework.name \"pytorch-fsdp2\" or \"pytorch-fsdp\" beside it (a setting of PyTorch's FSDP)");
  if (auto x = r.find("compile")) f.compile = x->boolean();
  if (auto x = r.find("reshard_after_forward")) f.reshard_after_forward = x->boolean();
  if (auto x = r.find("transformer_engine_kernels")) f.transformer_engine_kernels = x->boolean();
  if (auto x = r.find("reduce_dtype"))
    f.reduce_dtype_bytes = x->one_of({"float32", "bfloat16"}, "gradient reduction dtype") == "float32" ? 4 : 2;
  else if (f.name == FrameworkName::pytorch_fsdp2)  // stated as its default, which to_json writes
    f.reduce_dtype_bytes = gradient_reduce_bytes(f);
  if (auto x = r.find("main_grad_dtype"))
    f.main_grad_dtype_bytes = x->one_of({"float32", "bfloat16"}, "main gradient dtype") == "float32" ? 4 : 2;
}

}  // namespace

FrameworkConfig parse_framework(const Reader& r, ModelConfig& model, const std::optional<Reader>& model_backend) {
  r.only_keys({"name", "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "gradient_accumulation_fusion",
               "cross_entropy_loss_fusion", "residual_fusion", "use_distributed_optimizer", "attention_backend",
               "cp_comm_type", "zero_implementation", "moe_token_dispatcher_type",
               "overlap_moe_expert_parallel_comm", "delay_wgrad_compute", "scatter_gather_tensors_in_pipeline",
               "defer_embedding_wgrad_compute", "wgrad_deferral_limit", "deepspeed_bf16_optimizer", "compile", "reshard_after_forward",
               "transformer_engine_kernels", "reduce_dtype", "main_grad_dtype",
               "checkpoint_early_stop"});
  FrameworkConfig f;
  if (auto x = r.find("name"))
    f.name = *framework_name(x->one_of({"twin", "megatron-core", "pytorch-fsdp2", "pytorch-fsdp"}, "framework"));
  if (auto x = r.find("overlap_grad_reduce")) f.overlap_grad_reduce = x->boolean();
  if (auto x = r.find("overlap_param_gather")) f.overlap_param_gather = x->boolean();
  if (auto x = r.find("tp_comm_overlap")) f.tp_comm_overlap = x->boolean();
  if (auto x = r.find("gradient_accumulation_fusion")) f.gradient_accumulation_fusion = x->boolean();
  if (auto x = r.find("cross_entropy_loss_fusion")) f.cross_entropy_loss_fusion = x->boolean();
  if (auto x = r.find("residual_fusion")) f.residual_fusion = x->boolean();
  if (auto x = r.find("use_distributed_optimizer")) f.use_distributed_optimizer = x->boolean();
  if (auto x = r.find("cp_comm_type"))
    f.cp_comm_type = x->one_of({"p2p", "all_gather"}, "context-parallel exchange") == "p2p" ? CpCommType::p2p
                                                                                        : CpCommType::all_gather;
  if (auto x = r.find("zero_implementation"))
    f.zero_implementation = x->one_of({"megatron", "deepspeed"}, "ZeRO-3 implementation") == "megatron"
                                ? ZeroImplementation::megatron
                                : ZeroImplementation::deepspeed;
  parse_expert_parallel(r, f);
  if (auto x = r.find("scatter_gather_tensors_in_pipeline")) f.scatter_gather_tensors_in_pipeline = x->boolean();
  parse_deferred_embedding_wgrad(r, model, f);
  if (auto x = r.find("deepspeed_bf16_optimizer")) f.deepspeed_bf16_optimizer = x->boolean();
  parse_pytorch_and_gradients(r, f);
  if (auto x = r.find("checkpoint_early_stop")) f.checkpoint_early_stop = x->boolean();
  if (auto x = r.find("attention_backend")) {
    const AttentionBackend backend =
        *attention_backend_from_string(x->one_of({"flash", "fused", "unfused"}, "attention backend"));
    if (model_backend && backend != model.attention_backend)
      x->fail(fmt::format("the same backend as model.attention_backend (\"{}\")", to_string(model.attention_backend)));
    model.attention_backend = backend;
  }
  return f;
}

void apply_distributed_optimizer(Scenario& s, const Reader& root) {
  if (!s.framework.use_distributed_optimizer) return;
  const int stage = *s.framework.use_distributed_optimizer ? 1 : 0;
  const Reader flag = root.required("framework").required("use_distributed_optimizer");
  if (s.pins_family_plan()) return;  // a pinned family plan gives each layer or phase its own ZeRO stage
  if (s.strategy) {
    if (s.strategy->zero_stage != stage)
      flag.fail_plain(fmt::format("use_distributed_optimizer {} means zero_stage {}, but the strategy pins zero_stage {}",
                                  stage == 1, stage, s.strategy->zero_stage));
    return;
  }
  if (std::find(s.search.zero_stage.begin(), s.search.zero_stage.end(), stage) == s.search.zero_stage.end())
    flag.fail_plain(fmt::format("use_distributed_optimizer {} means zero_stage {}, which search.zero_stage does not list",
                                stage == 1, stage));
  s.search.zero_stage = {stage};
}

// What DeepSpeed's BF16_Optimizer ran under (56c522386): bf16 (the engine picks it for bf16 only), its own ZeRO-1
// (twin's zero_stage 1), gradients reduced once after the backward and weights gathered inside step() (both overlaps
// off), no MoE (buffered_allreduce_fallback asserts it for the optimizer's own gradients) and DeepSpeed, not FSDP2.
void check_deepspeed_bf16_optimizer(Scenario& s, const Reader& root) {
  if (!s.framework.deepspeed_bf16_optimizer) return;
  const Reader flag = root.required("framework").required("deepspeed_bf16_optimizer");
  if (s.training.precision != "bf16")
    flag.fail("training.precision \"bf16\" beside it (DeepSpeed runs it for bf16 only)");
  if (s.model.is_moe()) flag.fail("a dense model (DeepSpeed's _bf16_reduce_grads refuses MoE layers)");
  if (s.framework.overlap_grad_reduce || s.framework.overlap_param_gather)
    flag.fail("overlap_grad_reduce and overlap_param_gather false beside it (the optimizer reduces its gradient buffer "
              "after the backward and gathers the weights inside its step)");
  if (pytorch_fsdp(s.framework.name)) flag.fail("a framework other than pytorch-fsdp2 and pytorch-fsdp");
  if (s.plans_families())
    flag.fail("uniform strategies beside it (no per-layer, hot-switching or asymmetric plan)");
  if (s.strategy) {
    if (s.strategy->zero_stage != 1)
      flag.fail("strategy.zero_stage 1 beside it (the optimizer shards its states as ZeRO-1)");
    return;
  }
  if (std::find(s.search.zero_stage.begin(), s.search.zero_stage.end(), 1) == s.search.zero_stage.end())
    flag.fail("search.zero_stage listing 1 beside it (the optimizer shards its states as ZeRO-1)");
  s.search.zero_stage = {1};
}

// Where twin defers the output layer's weight gradients: the stages that Megatron's own schedules lower
// (strategies/lowering_pipeline.cpp), so not double strand, per-layer, hot-switching or asymmetric plans; and, as
// Megatron-Core refuses it without pipeline parallelism, not a pinned strategy of one stage (a search's one-stage
// candidates run without it, as their Megatron launch would).
void check_deferred_embedding_wgrad(const Scenario& s, const Reader& root) {
  if (!s.framework.defer_embedding_wgrad_compute) return;
  const Reader flag = root.required("framework").required("defer_embedding_wgrad_compute");
  if (s.plans_families())
    flag.fail("uniform strategies beside it (twin defers them in Megatron's schedules only, not in a per-layer, "
              "hot-switching or asymmetric plan)");
  if (s.strategy && s.strategy->pipeline_model_parallel_size < 2)
    flag.fail_plain("defer_embedding_wgrad_compute needs pipeline parallelism (Megatron-Core refuses it without): "
                    "expected strategy.pipeline_model_parallel_size > 1, or false here");
  const bool double_strand =
      s.strategy ? s.strategy->schedule == Schedule::double_strand
                 : std::find(s.search.schedule.begin(), s.search.schedule.end(), Schedule::double_strand) !=
                       s.search.schedule.end();
  if (double_strand)
    flag.fail("Megatron's schedules beside it (twin defers them in 1F1B, interleaved and GPipe, not in double strand)");
}

}  // namespace twin
