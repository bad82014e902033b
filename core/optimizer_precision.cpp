#include "core/optimizer_precision.hpp"

namespace twin {

std::string to_string(StateDtype dtype) {
  switch (dtype) {
    case StateDtype::fp32: return "fp32";
    case StateDtype::bf16: return "bf16";
    case StateDtype::fp16: return "fp16";
    case StateDtype::fp8: return "fp8";
  }
  return "fp32";
}

std::optional<StateDtype> state_dtype_from_string(std::string_view name) {
  for (StateDtype dtype : {StateDtype::fp32, StateDtype::bf16, StateDtype::fp16, StateDtype::fp8})
    if (name == to_string(dtype)) return dtype;
  return std::nullopt;
}

std::string to_string(const OptimizerPrecision& p) {
  return "main_params " + to_string(p.main_params) + (p.store_param_remainders ? " as 16-bit remainders" : "") +
         ", exp_avg " + to_string(p.exp_avg) + ", exp_avg_sq " + to_string(p.exp_avg_sq);
}

}  // namespace twin
