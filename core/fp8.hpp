// FP8 training as Megatron-LM and Transformer Engine name it (scenario training.fp8): the format, the scaling
// recipe, which of a linear's GEMMs run in FP8, whether the parameters are kept in FP8 and gathered so, and the
// layers kept in BF16. Read from NVIDIA/Megatron-LM at kMegatronCommit (core/megatron_flags.hpp):
// TransformerConfig's fp8 fields (megatron/core/transformer/transformer_config.py:587-658) and
// --fp8-param-gather (megatron/training/arguments.py:2016). Absent: no FP8 (every GEMM in the precision).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace twin {

// --fp8-format: e4m3 for every FP8 tensor, or hybrid (e4m3 activations and weights, e5m2 output gradients).
enum class Fp8Format : std::uint8_t { e4m3, hybrid };

// --fp8-recipe: how the FP8 tensors are scaled. delayed: one scale per tensor from the amax history of past
// steps; tensorwise: one scale per tensor from the tensor's own amax (current scaling: an amax pass before the
// cast); blockwise: a scale per 1x128 block of activations and gradients and per 128x128 block of weights
// (DeepSeek-V3's recipe); mxfp8: a power-of-two scale per 32 elements (OCP MX, Blackwell's tensor cores only).
enum class Fp8Recipe : std::uint8_t { delayed, tensorwise, blockwise, mxfp8 };

struct Fp8Config {
  Fp8Format format = Fp8Format::hybrid;
  Fp8Recipe recipe = Fp8Recipe::delayed;            // Megatron's default
  bool param_gather = false;                        // --fp8-param-gather: weights kept and all-gathered in FP8
  bool wgrad = true;                                // --no-fp8-wgrad: the weight-gradient GEMM in BF16
  int amax_history_len = 1;                         // --fp8-amax-history-len (delayed scaling)
  bool first_last_layers_bf16 = false;              // --first-last-layers-bf16 (not with delayed scaling)
  int num_layers_at_start_in_bf16 = 1;              // when first_last_layers_bf16
  int num_layers_at_end_in_bf16 = 1;
  bool operator==(const Fp8Config&) const = default;
};

// Whether transformer layer `layer` (0-based, of `num_layers`) runs its linears in FP8.
bool layer_runs_fp8(const Fp8Config& fp8, int layer, int num_layers);

// Bytes one FP8 copy of a tensor of `elements` holds beside its data under `recipe`: its scales (per tensor: 4
// bytes; blockwise: 4 bytes per 128-element block, 1x128 for activations; mxfp8: 1 byte per 32 elements).
double fp8_scale_bytes(Fp8Recipe recipe, double elements);

class JsonReader;
// training.fp8 (`format` required; the rest Megatron's defaults): keys format, recipe, param_gather, wgrad,
// amax_history_len, first_last_layers_bf16, num_layers_at_start_in_bf16, num_layers_at_end_in_bf16.
Fp8Config parse_fp8(const JsonReader& r);

std::string to_string(Fp8Format format);
std::string to_string(Fp8Recipe recipe);
std::optional<Fp8Format> fp8_format_from_string(std::string_view name);
std::optional<Fp8Recipe> fp8_recipe_from_string(std::string_view name);
std::vector<std::string> fp8_format_names();
std::vector<std::string> fp8_recipe_names();

}  // namespace twin
