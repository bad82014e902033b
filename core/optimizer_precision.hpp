// How the optimizer stores its state: Megatron-LM's precision-aware optimizer settings
// (--use-precision-aware-optimizer with --main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype; scenario
// keys training.main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype). The update's math is fp32 whatever
// the storage; lower precision trades optimizer memory and time for rounding in the state.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace twin {

enum class StateDtype : std::uint8_t { fp32, bf16, fp16, fp8 };

// main_params: the master copy of the weights. bf16 means no copy: the bf16 model parameters are updated in
// place (PyTorch's pure-bf16 recipe; beyond Megatron's fp32/fp16 choices). exp_avg, exp_avg_sq: Adam's
// first and second moments (SGD keeps exp_avg as its momentum).
// store_param_remainders: an fp32 master copy of bf16 parameters kept as the 16 low bits the bf16 parameters lack
// (2 bytes per parameter; the fp32 value is the two put together): Apex's DistributedFusedAdam, which NeMo's
// `distributed_fused_adam` runs with it for bf16 models (NeMo megatron_base_model.py, setup_optimization:
// store_params False, store_param_remainders True when the optimizer is fp32 and the model bf16), and Transformer
// Engine's FusedAdam. Scenario key training.store_param_remainders (bf16 training, fp32 main parameters).
struct OptimizerPrecision {
  StateDtype main_params = StateDtype::fp32;
  StateDtype exp_avg = StateDtype::fp32;
  StateDtype exp_avg_sq = StateDtype::fp32;
  bool store_param_remainders = false;
  bool is_default() const { return *this == OptimizerPrecision{}; }
  bool operator==(const OptimizerPrecision&) const = default;
};

std::string to_string(StateDtype dtype);                           // "fp32", "bf16", "fp16", "fp8"
std::optional<StateDtype> state_dtype_from_string(std::string_view name);
inline int bytes_of(StateDtype dtype) {
  switch (dtype) {
    case StateDtype::fp32: return 4;
    case StateDtype::bf16:
    case StateDtype::fp16: return 2;
    case StateDtype::fp8: return 1;
  }
  return 4;
}

// Whether `twin execute` (its AdamW kernel, and the calibration bench of it) stores a state in `dtype`:
// fp32 and bf16; the others are priced by the simulator only.
inline bool executor_stores(StateDtype dtype) { return dtype == StateDtype::fp32 || dtype == StateDtype::bf16; }

// Bytes per parameter of the master copy under mixed precision (0 when the bf16 parameters are the main ones).
inline int master_bytes(const OptimizerPrecision& p) {
  if (p.store_param_remainders) return 2;
  return p.main_params == StateDtype::bf16 ? 0 : bytes_of(p.main_params);
}

// "main_params fp32, exp_avg bf16, exp_avg_sq fp32" (", as 16-bit remainders" after fp32 when they are)
std::string to_string(const OptimizerPrecision& precision);

}  // namespace twin
