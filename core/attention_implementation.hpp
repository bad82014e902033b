// The attention implementations `twin execute` can run (gpu/attention.hpp implements them): named here, below
// the GPU layer, so that what reads a run (recalibration) knows which one the profiles price.
#pragma once
#include <optional>
#include <string_view>

namespace twin {

//   cudnn               cuDNN's fused flash attention; its backward adds dQ with fp32 atomics
//   cudnn_deterministic the same forward, a bit-reproducible backward (about 2x the backward time on Hopper)
//   kernels             twin's own flash-style kernels (gpu/kernels), deterministic
enum class AttentionImplementation { cudnn, cudnn_deterministic, kernels };

// What `twin execute` runs unless told otherwise, and so what `twin calibrate` times and profiles price.
inline constexpr AttentionImplementation kDefaultAttentionImplementation = AttentionImplementation::cudnn;

const char* to_string(AttentionImplementation backend);  // "cudnn", "cudnn-deterministic", "kernels"
std::optional<AttentionImplementation> attention_implementation_from_string(std::string_view name);

}  // namespace twin
