// Which framework's training a prediction is for: the framework whose kernels and steps a profile measured
// (profile "framework"), and the one a scenario describes (scenario framework.name). twin's own executor
// ("twin"), Megatron-LM / NeMo ("megatron-core"), PyTorch FSDP2 with DTensor as torchtitan runs it
// ("pytorch-fsdp2"), PyTorch's FullyShardedDataParallel of flat parameters (FSDP1) as Composer / LLM Foundry run it
// ("pytorch-fsdp"). A prediction with a profile of another framework prices the scenario's ops at that
// framework's speed: twin says so (cli/simulate_command.cpp).
#pragma once
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace twin {

enum class FrameworkName { twin, megatron_core, pytorch_fsdp2, pytorch_fsdp };

inline constexpr std::array<std::string_view, 4> kFrameworkNames = {"twin", "megatron-core", "pytorch-fsdp2",
                                                                    "pytorch-fsdp"};

// Eager PyTorch sharding its model with one of its FSDPs (strategies/pytorch_fsdp2.hpp): its own kernels, copies
// and host time, not Megatron's.
constexpr bool pytorch_fsdp(FrameworkName name) {
  return name == FrameworkName::pytorch_fsdp2 || name == FrameworkName::pytorch_fsdp;
}
constexpr bool pytorch_fsdp(const std::optional<FrameworkName>& name) { return name && pytorch_fsdp(*name); }

constexpr std::string_view to_string(FrameworkName name) { return kFrameworkNames[static_cast<std::size_t>(name)]; }

inline std::optional<FrameworkName> framework_name(std::string_view text) {
  for (std::size_t i = 0; i < kFrameworkNames.size(); ++i)
    if (kFrameworkNames[i] == text) return static_cast<FrameworkName>(i);
  return std::nullopt;
}

// "\"twin\", \"megatron-core\", \"pytorch-fsdp2\" or \"pytorch-fsdp\"", for messages.
inline std::string framework_name_list() {
  return "\"twin\", \"megatron-core\", \"pytorch-fsdp2\" or \"pytorch-fsdp\"";
}

// The warning when a scenario describes one framework's training and its profile measured another's ("" when they
// agree or the scenario names none).
inline std::string framework_mismatch(std::optional<FrameworkName> scenario, std::optional<FrameworkName> profile) {
  if (!scenario || !profile || *scenario == *profile) return {};
  return "the scenario describes " + std::string(to_string(*scenario)) + " training (framework.name) but its profile " +
         "measured " + std::string(to_string(*profile)) + " kernels: the prediction is for " +
         std::string(to_string(*profile)) + "'s speed; fold a trace of the scenario's framework (twin calibrate " +
         "--from-trace) for its own";
}

}  // namespace twin
