// The scenario's "framework" section: Megatron's switches and the PyTorch FSDP2 settings (core/framework.hpp), and
// what use_distributed_optimizer says of the ZeRO stage.
#pragma once
#include <optional>

#include "core/framework.hpp"
#include "core/json_reader.hpp"
#include "core/model.hpp"
#include "core/scenario.hpp"

namespace twin {

// `r` is the section. attention_backend may be given here or under model (where it is stored; `model_backend` is
// the model's key when given): both given must agree. Throws InputError at the offending JSON path.
FrameworkConfig parse_framework(const JsonReader& r, ModelConfig& model, const std::optional<JsonReader>& model_backend);

// use_distributed_optimizer given: ZeRO 1 (true) or 0 (false); a pinned strategy must agree, a search keeps only
// that stage. `root` is the scenario document.
void apply_distributed_optimizer(Scenario& s, const JsonReader& root);

// deepspeed_bf16_optimizer true: checks what it needs (bf16, a dense model, both overlaps off, zero_stage 1) and keeps
// only zero_stage 1 in a search. Throws InputError at /framework/deepspeed_bf16_optimizer.
void check_deepspeed_bf16_optimizer(Scenario& s, const JsonReader& root);

// defer_embedding_wgrad_compute true: checks where twin applies it (Megatron's schedules of uniform strategies, a pinned
// strategy with pipeline parallelism). Throws InputError at /framework/defer_embedding_wgrad_compute.
void check_deferred_embedding_wgrad(const Scenario& s, const JsonReader& root);

}  // namespace twin
