// The cheap refusals first (the plan's kind, memory, strategy and framework switches), then the parameter
// layout and the op bindings of every rank class, which refuse what they do not run.
#include "executor/plan_check.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "executor/op_binding.hpp"
#include "executor/parameters.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"

namespace twin::exec {

void check_executable_plan(const Plan& plan, const std::string& file) {
  const Strategy& s = plan.strategy;
  // A family plan's `strategy` is only its home strategy: lowering that alone would run another plan.
  if (const auto family = plan.document.find("family_plan"); family != plan.document.end() && family->is_object())
    throw InputError(file, "/family_plan",
                     fmt::format("a uniform plan: twin execute does not run {} plans yet (simulate without "
                                 "per_layer, hot_switch or a mixed cluster to get one)",
                                 family->value("family", std::string("family"))));
  const MemoryEstimate memory = estimate_memory(plan.scenario, s);
  const std::string oom = out_of_memory_reason(memory, plan.scenario.cluster.node_groups.front().gpu.memory_GiB);
  if (!oom.empty()) throw InputError(file, "/strategy", "a plan that fits; the simulator says it does not: " + oom);
  // A double-strand pass over stages sends one strand's activation and the other's gradient in one p2p.
  if (s.schedule == Schedule::double_strand && s.pipeline_model_parallel_size > 1)
    throw InputError(file, "/strategy/pipeline_model_parallel_size",
                     "1 under double-strand (twin execute does not run the folded pipeline's two-tensor p2p yet)");
  if (s.context_parallel_size > 1 || s.expert_model_parallel_size > 1)
    throw InputError(file, "/strategy", "no context or expert parallelism (twin execute does not run them yet)");
  // The table's copy sits at another offset of another unit than the table: after ZeRO's reduce-scatter the
  // two hold different shards, and summing them over the embedding group would mix them.
  if (!plan.scenario.model.untie_embeddings_and_output_weights && s.pipeline_model_parallel_size > 1 &&
      s.zero_stage >= 1 && s.data_parallel_size * s.context_parallel_size > 1)
    throw InputError(file, "/strategy/zero_stage",
                     "0 with tied embeddings over several pipeline stages and data-parallel ranks (twin execute "
                     "sums the embedding's two copies' full gradients)");
  if (plan.scenario.framework.tp_comm_overlap && s.sequence_parallel && s.tensor_model_parallel_size > 1)
    throw InputError(file, "/scenario/framework/tp_comm_overlap",
                     "false (twin execute does not run Transformer Engine's userbuffers overlap yet)");
  if (!plan.scenario.framework.cross_entropy_loss_fusion)
    throw InputError(file, "/scenario/framework/cross_entropy_loss_fusion",
                     "true (twin execute runs the fused vocabulary-parallel cross-entropy)");
  if (!plan.scenario.framework.gradient_accumulation_fusion)
    throw InputError(file, "/scenario/framework/gradient_accumulation_fusion",
                     "true (twin execute accumulates weight gradients inside the GEMM)");
  const TrainingConfig& training = plan.scenario.training;
  if (training.precision != "bf16")
    throw InputError(file, "/scenario/training/precision", "bf16 (twin execute trains in bf16 mixed precision)");
  if (training.optimizer != "adam")
    throw InputError(file, "/scenario/training/optimizer", "adam (twin execute runs AdamW)");
  const OptimizerPrecision& precision = training.optimizer_precision;
  for (const auto& [key, dtype] : {std::pair{"main_params_dtype", precision.main_params},
                                   std::pair{"exp_avg_dtype", precision.exp_avg},
                                   std::pair{"exp_avg_sq_dtype", precision.exp_avg_sq}})
    if (!executor_stores(dtype))
      throw InputError(file, std::string("/scenario/training/") + key,
                       "fp32 or bf16 (twin execute stores optimizer state in these; " + to_string(dtype) +
                           " is priced by the simulator only)");
  try {
    plan_parameter_units(plan.scenario, s, RankPlacement{}, 0);
    const IterationGraph graph = lower_to_op_graphs(plan.scenario, s);
    for (const RankClass& rc : graph.classes) bind_ops(rc, !plan.scenario.model.untie_embeddings_and_output_weights);
  } catch (const std::invalid_argument& error) {
    throw InputError(file, "/scenario/model", std::string("a model and strategy twin execute runs: ") + error.what());
  }
}

}  // namespace twin::exec
