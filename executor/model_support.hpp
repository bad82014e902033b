// The model features twin execute has no weights or kernels for, in one list: the plan check refuses a plan that
// uses one at its JSON path (executor/plan_check.cpp), and the parameter layout refuses to lay one out
// (executor/parameters.cpp) for callers that skip the check. The simulator prices every one of them.
#pragma once
#include <optional>
#include <string>

#include "core/model.hpp"

namespace twin::exec {

struct UnsupportedModelFeature {
  std::string path;     // under /scenario/model, e.g. "qk_layernorm" or "moe/shared_expert_ffn_hidden_size"
  std::string feature;  // what the model has, e.g. "QK-norm weights (q_norm, k_norm)"
};

// The first feature of `model` that twin execute does not run, in a fixed order; nullopt for a model it runs
// (Llama-style, dense or with experts: RMSNorm, RoPE, SwiGLU, GeGLU, GeLU or squared ReLU, QK-norm, fine-grained and
// shared experts, dense first layers, sliding-window attention on every or alternating layers, soft-capped final
// logits; Gemma-2 and 3's post norms in dense layers; GPT-style: LayerNorm, learned positions, linear biases (the
// experts' and the router's too);
// hidden dropout in dense pre-norm layers, attention dropout; unfused attention as Megatron-LM's kernels, over
// whole causal scores without windows, caps or sinks). Windows and unfused attention run at
// context_parallel_size 1, post norms at tensor_model_parallel_size 1
// and without FP8 (executor/plan_check.cpp, executor/fp8_plan_check.cpp).
// Shared experts run at TP 1 (executor/plan_check.cpp refuses them under TP at their key, executor/parameters.cpp
// too for callers that skip the check).
std::optional<UnsupportedModelFeature> first_unsupported_feature(const ModelConfig& model);

}  // namespace twin::exec
