#include "core/attention_implementation.hpp"

namespace twin {

const char* to_string(AttentionImplementation backend) {
  switch (backend) {
    case AttentionImplementation::cudnn: return "cudnn";
    case AttentionImplementation::cudnn_deterministic: return "cudnn-deterministic";
    case AttentionImplementation::kernels: return "kernels";
  }
  return "?";
}

std::optional<AttentionImplementation> attention_implementation_from_string(std::string_view name) {
  for (AttentionImplementation b : {AttentionImplementation::cudnn, AttentionImplementation::cudnn_deterministic, AttentionImplementation::kernels})
    if (name == to_string(b)) return b;
  return std::nullopt;
}

}  // namespace twin
