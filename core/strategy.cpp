// Strategy identity and the names of schedules and recompute granularities as scenarios spell them.
#include "core/strategy.hpp"

#include <fmt/format.h>

namespace twin {

std::string Strategy::key() const {
  const std::string layout = pipeline_model_parallel_layout.empty()
                                 ? std::string()
                                 : ".layout-" + pipeline_layout_key(pipeline_model_parallel_layout);
  std::string recompute_key = to_string(recompute);
  for (std::size_t i = 0; i < recompute_modules.size(); ++i)
    recompute_key += (i == 0 ? "-" : "+") + to_string(recompute_modules[i]);
  const std::string etp =
      expert_tensor_parallel_size == 1 ? std::string() : fmt::format(".etp{}", expert_tensor_parallel_size);
  return fmt::format("tp{}.pp{}.cp{}.ep{}{}.dp{}.vpp{}.{}.mbs{}.z{}.rc-{}.{}", tensor_model_parallel_size,
                     pipeline_model_parallel_size, context_parallel_size, expert_model_parallel_size, etp,
                     data_parallel_size, virtual_pipeline_model_parallel_size, sequence_parallel ? "sp" : "nosp",
                     micro_batch_size, zero_stage, recompute_key, to_string(schedule)) +
         layout;
}

std::string to_string(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved_1f1b: return "interleaved-1f1b";
    case Schedule::double_strand: return "double-strand";
  }
  return "unknown";
}

std::string to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "unknown";
}

std::optional<Schedule> schedule_from_string(std::string_view s) {
  for (Schedule candidate : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved_1f1b,
                             Schedule::double_strand})
    if (s == to_string(candidate)) return candidate;
  return std::nullopt;
}

std::optional<Recompute> recompute_from_string(std::string_view s) {
  for (Recompute candidate : {Recompute::none, Recompute::selective, Recompute::full})
    if (s == to_string(candidate)) return candidate;
  return std::nullopt;
}

std::vector<std::string> schedule_names() {
  return {"gpipe", "1f1b", "interleaved-1f1b", "double-strand"};
}

std::vector<std::string> recompute_names() { return {"none", "selective", "full"}; }

std::string to_string(RecomputeModule m) {
  switch (m) {
    case RecomputeModule::core_attn: return "core_attn";
    case RecomputeModule::moe_act: return "moe_act";
    case RecomputeModule::layernorm: return "layernorm";
    case RecomputeModule::mla_up_proj: return "mla_up_proj";
    case RecomputeModule::mlp: return "mlp";
    case RecomputeModule::moe: return "moe";
    case RecomputeModule::shared_experts: return "shared_experts";
  }
  return "unknown";
}

std::optional<RecomputeModule> recompute_module_from_string(std::string_view s) {
  for (int i = 0; i < kRecomputeModuleCount; ++i)
    if (s == to_string(static_cast<RecomputeModule>(i))) return static_cast<RecomputeModule>(i);
  return std::nullopt;
}

std::vector<std::string> recompute_module_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kRecomputeModuleCount; ++i) names.push_back(to_string(static_cast<RecomputeModule>(i)));
  return names;
}

RecomputeModuleMask recomputed_modules(const Strategy& strategy) {
  if (strategy.recompute != Recompute::selective) return {};
  if (strategy.recompute_modules.empty()) return module_bit(RecomputeModule::core_attn);  // Megatron's default
  RecomputeModuleMask mask;
  for (RecomputeModule m : strategy.recompute_modules) mask |= module_bit(m);
  return mask;
}

}  // namespace twin
