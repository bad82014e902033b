// The flags become the JSON of a scenario (model, training, framework, strategy) beside the base scenario's
// cluster, and that document is parsed as any scenario is, so that every check of the scenario format applies;
// an error there is told as the flag that set the offending field. Megatron's defaults for absent flags are those
// of megatron/training/arguments.py and its config dataclasses at kMegatronCommit (core/megatron_flags.cpp).
#include "core/megatron_scenario.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/megatron_reading.hpp"
#include "core/pipeline_layout.hpp"

namespace twin {
namespace {

using megatron_reading::given;
using megatron_reading::read_model;
using megatron_reading::read_model_variants;
using megatron_reading::read_moe;
using megatron_reading::Reading;
using megatron_reading::refuse;
using nlohmann::json;

// --fp8-format and its companions as training.fp8 (absent: no FP8; the custom recipe names a Python factory
// twin cannot price).
void read_fp8(Reading& r) {
  const MegatronArguments& a = r.a;
  if (!a.has("--fp8-format")) return;
  const std::string recipe = a.text("--fp8-recipe", "delayed");
  if (recipe == "custom") refuse(r.source, "--fp8-recipe", "expected delayed, tensorwise, blockwise or mxfp8, got custom");
  r.doc.set("/training/fp8/format", a.text("--fp8-format", "hybrid"), "--fp8-format");
  r.doc.set("/training/fp8/recipe", recipe, "--fp8-recipe");
  r.doc.set("/training/fp8/param_gather", a.has("--fp8-param-gather"), "--fp8-param-gather");
  r.doc.set("/training/fp8/wgrad", !a.has("--no-fp8-wgrad"), "--no-fp8-wgrad");
  if (recipe == "delayed")
    r.doc.set("/training/fp8/amax_history_len", a.integer("--fp8-amax-history-len", 1), "--fp8-amax-history-len");
  const bool bf16_edges = a.has("--first-last-layers-bf16");
  r.doc.set("/training/fp8/first_last_layers_bf16", bf16_edges, "--first-last-layers-bf16");
  if (!bf16_edges) return;
  r.doc.set("/training/fp8/num_layers_at_start_in_bf16", a.integer("--num-layers-at-start-in-bf16", 1),
            "--num-layers-at-start-in-bf16");
  r.doc.set("/training/fp8/num_layers_at_end_in_bf16", a.integer("--num-layers-at-end-in-bf16", 1),
            "--num-layers-at-end-in-bf16");
}

// The learning-rate schedule and clipping as Megatron runs them (its defaults: a linear decay to --min-lr over
// --train-iters), when the command line gives --lr (Megatron requires it); schedules twin execute does not run
// and the sample-based flags are listed.
void read_recipe(Reading& r) {
  const MegatronArguments& a = r.a;
  if (a.has("--clip-grad")) r.doc.set("/training/clip_grad", a.real("--clip-grad", 1.0), "--clip-grad");
  if (!a.has("--lr")) return;
  r.doc.set("/training/lr", a.real("--lr", 3e-4), "--lr");
  if (a.has("--min-lr")) r.doc.set("/training/min_lr", a.real("--min-lr", 0), "--min-lr");
  const std::string style = a.text("--lr-decay-style", "linear");
  if (!lr_decay_style_from_string(style)) {
    r.note(given(*a.find("--lr-decay-style")) + ": twin execute runs constant, linear or cosine; not modelled");
    return;
  }
  r.doc.set("/training/lr_decay_style", style, "--lr-decay-style");
  if (a.has("--lr-warmup-iters"))
    r.doc.set("/training/lr_warmup_iters", a.integer("--lr-warmup-iters", 0), "--lr-warmup-iters");
  const char* decay = a.has("--lr-decay-iters") ? "--lr-decay-iters" : "--train-iters";
  if (a.has(decay)) r.doc.set("/training/lr_decay_iters", a.integer(decay, 1), decay);
}

void read_training(Reading& r) {
  const MegatronArguments& a = r.a;
  const long long seq = r.required("--seq-length"), micro = r.required("--micro-batch-size");
  const long long model_parallel = a.integer("--tensor-model-parallel-size", 1) *
                                   a.integer("--pipeline-model-parallel-size", 1) *
                                   a.integer("--context-parallel-size", 1);
  const long long data_parallel = r.base.cluster.total_gpus() / std::max(1LL, model_parallel);
  r.doc.set("/training/seq_length", seq, "--seq-length");
  // Megatron's default: one micro-batch per data-parallel rank (arguments.py:702).
  r.doc.set("/training/global_batch_size", a.integer("--global-batch-size", micro * data_parallel),
            "--global-batch-size");
  r.doc.set("/training/precision", a.has("--bf16") ? "bf16" : a.has("--fp16") ? "fp16" : "fp32", "--bf16");
  // bf16 training reduces its gradients in fp32 unless --grad-reduce-in-bf16 (arguments.py:1207-1216).
  if (a.has("--bf16"))
    r.doc.set("/framework/reduce_dtype", a.has("--grad-reduce-in-bf16") ? "bfloat16" : "float32", "--grad-reduce-in-bf16");
  read_fp8(r);
  const std::string optimizer = a.text("--optimizer", "adam");
  if (optimizer != "adam" && optimizer != "sgd")
    refuse(r.source, "--optimizer", fmt::format("expected adam or sgd (what twin models), got {}", optimizer));
  r.doc.set("/training/optimizer", optimizer, "--optimizer");
  read_recipe(r);
  const bool aware = a.has("--use-precision-aware-optimizer");
  for (const auto& [flag, key] :
       {std::pair{"--main-params-dtype", "main_params_dtype"}, std::pair{"--exp-avg-dtype", "exp_avg_dtype"},
        std::pair{"--exp-avg-sq-dtype", "exp_avg_sq_dtype"}}) {
    if (aware)
      r.doc.set(fmt::format("/training/{}", key), a.text(flag, "fp32"), flag);
    else if (a.has(flag))
      r.note(given(*a.find(flag)) + ": used by Megatron only with --use-precision-aware-optimizer");
  }
}

// ZeRO: Megatron-FSDP's sharding strategy, else the distributed optimizer (ZeRO 1) or none.
int zero_stage(const MegatronArguments& a) {
  if (a.has("--use-megatron-fsdp")) {
    const std::string sharding = a.text("--data-parallel-sharding-strategy", "optim_grads_params");
    return sharding == "optim_grads_params" ? 3 : sharding == "optim_grads" ? 2 : sharding == "optim" ? 1 : 0;
  }
  return a.has("--use-distributed-optimizer") ? 1 : 0;
}

void read_strategy(Reading& r) {
  const MegatronArguments& a = r.a;
  const long long tp = a.integer("--tensor-model-parallel-size", 1),
                  pp = a.integer("--pipeline-model-parallel-size", 1);
  r.doc.set("/strategy/tensor_model_parallel_size", tp, "--tensor-model-parallel-size");
  r.doc.set("/strategy/pipeline_model_parallel_size", pp, "--pipeline-model-parallel-size");
  r.doc.set("/strategy/context_parallel_size", a.integer("--context-parallel-size", 1), "--context-parallel-size");
  r.doc.set("/strategy/expert_model_parallel_size", a.integer("--expert-model-parallel-size", 1),
            "--expert-model-parallel-size");
  r.doc.set("/strategy/sequence_parallel", a.has("--sequence-parallel") && tp > 1, "--sequence-parallel");
  r.doc.set("/strategy/micro_batch_size", a.integer("--micro-batch-size", 1), "--micro-batch-size");
  r.doc.set("/strategy/zero_stage", zero_stage(a),
            a.has("--use-megatron-fsdp") ? "--data-parallel-sharding-strategy" : "--use-distributed-optimizer");
  // Virtual stages as validate_args derives them (arguments.py:958).
  long long layers = a.integer("--num-layers", 0);
  layers += a.has("--account-for-embedding-in-pipeline-split") + a.has("--account-for-loss-in-pipeline-split");
  long long virtual_stages = a.integer("--num-virtual-stages-per-pipeline-rank", 1);
  if (a.has("--num-layers-per-virtual-pipeline-stage"))
    virtual_stages = layers / pp / std::max(1LL, a.integer("--num-layers-per-virtual-pipeline-stage", 1));
  if (a.has("--pipeline-model-parallel-layout")) {  // validate_args: VP = the layout's stages / PP (arguments.py:941)
    const std::string layout = a.text("--pipeline-model-parallel-layout", "");
    for (const char* flag : {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"})
      if (a.has(flag))  // validate_args refuses both together: the layout states the virtual stages
        refuse(r.source, flag, "no virtual-stage flag beside --pipeline-model-parallel-layout (its '|' state them)");
    std::string expected;
    const std::optional<PipelineLayout> parsed = parse_pipeline_layout(layout, expected);
    if (!parsed) refuse(r.source, "--pipeline-model-parallel-layout", "expected " + expected);
    virtual_stages = std::max(1LL, parsed->virtual_stages() / std::max(1LL, pp));
    r.doc.set("/strategy/pipeline_model_parallel_layout", layout, "--pipeline-model-parallel-layout");
  }
  r.doc.set("/strategy/virtual_pipeline_model_parallel_size", virtual_stages,
            "--num-layers-per-virtual-pipeline-stage");
  r.doc.set("/strategy/schedule", virtual_stages > 1 ? "interleaved-1f1b" : "1f1b",
            "--num-layers-per-virtual-pipeline-stage");
  const std::string granularity = a.text("--recompute-granularity", "none");
  r.doc.set("/strategy/recompute", granularity, "--recompute-granularity");
  if (const MegatronArgument* modules = a.find("--recompute-modules")) {  // TransformerConfig reads them under selective
    if (granularity == "selective")
      r.doc.set("/strategy/recompute_modules", modules->values, "--recompute-modules");
    else
      r.note(given(*modules) + ": ignored without --recompute-granularity selective (transformer_config.py:1943)");
  }
  if (granularity == "full" &&
      (a.text("--recompute-method", "") != "uniform" || a.integer("--recompute-num-layers", 0) != 1))
    r.note(fmt::format("--recompute-method {} --recompute-num-layers {}: priced as every layer recomputed (uniform, 1)",
                       a.text("--recompute-method", "none"), a.text("--recompute-num-layers", "none")));
}

void read_framework(Reading& r) {
  const MegatronArguments& a = r.a;
  r.doc.set("/framework/overlap_grad_reduce", a.has("--overlap-grad-reduce"), "--overlap-grad-reduce");
  r.doc.set("/framework/overlap_param_gather", a.has("--overlap-param-gather"), "--overlap-param-gather");
  r.doc.set("/framework/tp_comm_overlap", a.has("--tp-comm-overlap"), "--tp-comm-overlap");
  r.doc.set("/framework/gradient_accumulation_fusion", !a.has("--no-gradient-accumulation-fusion"),
            "--no-gradient-accumulation-fusion");
  r.doc.set("/framework/cross_entropy_loss_fusion", a.has("--cross-entropy-loss-fusion"),
            "--cross-entropy-loss-fusion");
  if (a.has("--no-bias-dropout-fusion"))
    r.note("--no-bias-dropout-fusion: the bias, dropout and residual add as separate kernels; priced as they run "
           "fused (not modelled)");
  std::string cp_type = "p2p";
  if (const MegatronArgument* given_type = a.find("--cp-comm-type")) {
    for (const std::string& value : given_type->values)
      if (value != given_type->values.front() || (value != "p2p" && value != "allgather"))
        refuse(r.source, "--cp-comm-type",
               fmt::format("expected p2p or allgather for every layer (what twin models), got {}", value));
    cp_type = given_type->values.front() == "allgather" ? "all_gather" : "p2p";
  }
  r.doc.set("/framework/cp_comm_type", cp_type, "--cp-comm-type");
  if (a.has("--overlap-moe-expert-parallel-comm"))
    r.doc.set("/framework/overlap_moe_expert_parallel_comm", true, "--overlap-moe-expert-parallel-comm");
  if (a.has("--delay-wgrad-compute") && !a.has("--overlap-moe-expert-parallel-comm"))
    r.note("--delay-wgrad-compute without --overlap-moe-expert-parallel-comm: not modelled (twin delays the weight "
           "gradients only in the overlapped EP schedule)");
  else if (a.has("--delay-wgrad-compute"))
    r.doc.set("/framework/delay_wgrad_compute", true, "--delay-wgrad-compute");
  if (a.has("--defer-embedding-wgrad-compute")) {
    r.doc.set("/framework/defer_embedding_wgrad_compute", true, "--defer-embedding-wgrad-compute");
    if (a.has("--wgrad-deferral-limit"))
      r.doc.set("/framework/wgrad_deferral_limit", a.integer("--wgrad-deferral-limit", 0), "--wgrad-deferral-limit");
  } else if (a.has("--wgrad-deferral-limit")) {
    r.note(given(*a.find("--wgrad-deferral-limit")) + ": ignored without --defer-embedding-wgrad-compute "
           "(model_parallel_config.py:415)");
  }
}

// What the table does not hold, and the words around the arguments.
void note_the_rest(Reading& r, const MegatronCommandLine& command) {
  for (const std::string& assignment : command.environment) r.note(assignment + ": the environment, not modelled");
  if (!command.launcher.empty()) {
    std::string launcher;
    for (const std::string& word : command.launcher) launcher += (launcher.empty() ? "" : " ") + word;
    r.note(launcher + ": the launcher; the GPUs are the scenario's cluster");
  }
  for (const MegatronArgument& argument : command.arguments)
    if (!find_megatron_flag(argument.flag)) r.note(given(argument) + ": not modelled");
}

}  // namespace

MegatronScenario scenario_from_megatron_command_line(const Scenario& base, const MegatronCommandLine& command,
                                                     const std::string& source) {
  const MegatronArguments arguments(command.arguments);
  std::optional<std::string> connections;
  for (const std::string& assignment : command.environment)
    if (assignment.rfind("CUDA_DEVICE_MAX_CONNECTIONS=", 0) == 0)
      connections = assignment.substr(assignment.find('=') + 1);
  if (auto broken = megatron_rule_broken(arguments, base.cluster.total_gpus(), connections))
    throw InputError(source, "",
                     fmt::format("{} (launched on the scenario's {} GPUs)", *broken,
                                 base.cluster.total_gpus()));
  Reading r{arguments, base, source, {}, {}};
  read_model(r);
  read_model_variants(r);
  read_moe(r);
  read_training(r);
  read_strategy(r);
  read_framework(r);
  note_the_rest(r, command);
  json& doc = r.doc.root();
  const json resolved = to_json(base);
  doc["name"] = base.name;
  doc["cluster"] = resolved["cluster"];
  doc["profile"] = base.profile;
  doc["profile_scaling"] = base.profile_scaling;
  try {
    return {parse_scenario(doc, source), std::move(r.not_modelled)};
  } catch (const InputError& error) {
    const std::string flag = r.doc.flag_of(error.json_path());
    if (flag.empty()) throw;
    throw InputError(source, "", fmt::format("{}: {}", flag, error.expected()));
  }
}

MegatronScenario load_megatron_args(const Scenario& base, const std::filesystem::path& path) {
  const std::string text = read_input_file(path, "a Megatron-LM command line");
  return scenario_from_megatron_command_line(base, parse_megatron_command_line(text, path.string()), path.string());
}

}  // namespace twin
