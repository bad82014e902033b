// Each refusal says why: the executor casts a linear's tensors on the rows its GPU holds and runs the three GEMMs
// on them (executor/gpu/fp8_linears.hpp) with one scale per tensor, its own (tensorwise) or its history's (delayed),
// or one per block (blockwise); under delayed scaling with data or context parallelism the lowering's fp8_amax ops
// all-reduce the amaxes over the amax group (executor/gpu/fp8_linears.hpp). TP runs without SP (each rank casts
// whole activations and its weight shards) and, with per-tensor scales, with SP (FP8 gathers); block-scaled
// gathers, FP8 expert GEMMs, FP8 parameters and MXFP8 have no kernels here yet.
#include "executor/fp8_plan_check.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace twin::exec {

namespace {

void check_recipe(const Fp8Config& fp8, const std::string& file) {
  switch (fp8.recipe) {
    case Fp8Recipe::tensorwise:
    case Fp8Recipe::delayed: return;
    case Fp8Recipe::blockwise:
      // DeepSeek-V3's recipe and TE's Float8BlockScaling default: E4M3 in both passes (executor/gpu/fp8_linears.hpp).
      if (fp8.format != Fp8Format::e4m3)
        throw InputError(file, "/scenario/training/fp8/format",
                         "e4m3 with training.fp8.recipe blockwise (twin execute runs the block-scaled GEMMs in E4M3 "
                         "everywhere, as DeepSeek-V3 and Transformer Engine's Float8BlockScaling do; no E5M2 "
                         "block-scaled GEMM was checked on Hopper)");
      return;
    case Fp8Recipe::mxfp8:
      throw InputError(file, "/scenario/training/fp8/recipe",
                       "tensorwise, delayed or blockwise (MXFP8's 32-element scales run on Blackwell's tensor cores "
                       "only; this executor runs Hopper's FP8)");
  }
}

// Without SP a TP rank casts whole activations and its own shard of each weight, and the collectives around the
// linears move bf16 (Transformer Engine's _Linear: the row-parallel output's all-reduce and the column-parallel
// input gradient's stay in the activation dtype); delayed scaling's amaxes are reduced over TP too. Under SP with
// per-tensor scales, TE casts the local rows, gathers their rowwise FP8 copy and transposes it for wgrad (current
// scaling reduces those amaxes over TP first): so does the executor (executor/gpu/fp8_linears.hpp). Block scales
// would gather both copies with their records, which it does not do.
void check_sequence_parallel(const Plan& plan, const Fp8Config& fp8, const std::string& file) {
  if (plan.strategy.tensor_model_parallel_size <= 1 || !plan.strategy.sequence_parallel) return;
  if (fp8.recipe == Fp8Recipe::blockwise)
    throw InputError(file, "/strategy/sequence_parallel",
                     "false with training.fp8.recipe blockwise at tensor_model_parallel_size above 1 (twin execute "
                     "gathers FP8 tensors with one scale per tensor; tensorwise and delayed run with SP)");
  if (!fp8.wgrad)
    throw InputError(file, "/scenario/training/fp8/wgrad",
                     "true with sequence parallelism (SP gathers a row-parallel linear's output gradient in FP8, "
                     "so a bf16 weight gradient would have no gathered bf16 copy to read)");
}

// cuBLASLt's FP8 kernels take dimensions that are multiples of 16 (gpu/fp8_matmul.hpp), on each TP rank's shard;
// under SP each TP rank casts its share of the rows.
void check_shapes(const Plan& plan, const std::string& file) {
  const Scenario& scenario = plan.scenario;
  const ModelConfig& m = scenario.model;
  const std::int64_t head_dim = m.kv_channels > 0 ? m.kv_channels : m.hidden_size / std::max(m.num_attention_heads, 1);
  const std::int64_t tp = std::max(plan.strategy.tensor_model_parallel_size, 1);
  for (const auto& [key, width] : {std::pair{"hidden_size", m.hidden_size / tp},
                                   std::pair{"ffn_hidden_size", m.ffn_hidden_size / tp},
                                   std::pair{"kv_channels", head_dim}})
    if (width % 16)
      throw InputError(file, std::string("/scenario/model/") + key,
                       "a multiple of 16 per TP rank with training.fp8 (cuBLASLt's FP8 GEMMs), got " +
                           std::to_string(width));
  const std::int64_t tokens = plan.strategy.micro_batch_size * scenario.training.seq_length /
                              std::max(plan.strategy.context_parallel_size, 1) /
                              (plan.strategy.sequence_parallel ? tp : 1);
  if (tokens % 16)
    throw InputError(file, "/strategy/micro_batch_size",
                     "tokens per micro-batch and GPU (micro_batch_size x seq_length / context_parallel_size, / "
                     "tensor_model_parallel_size under SP) a multiple of 16 with training.fp8, got " +
                         std::to_string(tokens));
}

}  // namespace

void check_fp8_plan(const Plan& plan, const std::string& file) {
  const Scenario& scenario = plan.scenario;
  if (!scenario.training.fp8) return;
  const Fp8Config& fp8 = *scenario.training.fp8;
  check_recipe(fp8, file);
  // The FP8 linears add a bias in the forward GEMM's epilogue and take its gradient from the bf16 output gradient
  // the cast read (executor/gpu/fp8_linears.hpp): under SP that is this rank's rows of a row-parallel linear's,
  // whose bias gradient the bf16 linear takes from the gathered rows.
  if (scenario.model.add_bias_linear && plan.strategy.tensor_model_parallel_size > 1 && plan.strategy.sequence_parallel)
    throw InputError(file, "/strategy/sequence_parallel",
                     "false with FP8 linears and linear biases at tensor_model_parallel_size above 1 (twin execute "
                     "takes an FP8 linear's bias gradient from the whole output gradient, which SP gathers in FP8)");
  if (fp8.param_gather)
    throw InputError(file, "/scenario/training/fp8/param_gather",
                     "false (twin execute keeps bf16 weights and casts them after each step; FP8 parameters are "
                     "priced by the simulator only)");
  check_sequence_parallel(plan, fp8, file);
  if (scenario.model.is_moe())
    throw InputError(file, "/scenario/training/fp8",
                     "no fp8 section for an MoE model (twin execute runs no FP8 expert GEMMs yet)");
  if (scenario.framework.residual_fusion)
    throw InputError(file, "/scenario/framework/residual_fusion",
                     "false with training.fp8 (the FP8 GEMM adds no residual stream in its epilogue)");
  check_shapes(plan, file);
  // ZeRO shards over the data group, its context-parallel ranks included (executor/parameters.hpp's replicas).
  const int data_group = plan.strategy.data_parallel_size * plan.strategy.context_parallel_size;
  if (plan.strategy.zero_stage >= 1 && data_group > 1)
    throw InputError(file, "/strategy/zero_stage",
                     "0 with training.fp8 under data or context parallelism (the weights' FP8 casts follow the "
                     "update, before the ZeRO all-gather of the other shards' weights, and read whole weights, which "
                     "ZeRO-3 keeps only between its gathers)");
}

}  // namespace twin::exec
