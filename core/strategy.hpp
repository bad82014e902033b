// One parallel strategy: how a model is split over the cluster and how its micro-batches are scheduled.
// Field names are Megatron-LM's; this value type is shared by the search, the simulator and the executor.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/pipeline_layout.hpp"

namespace twin {

enum class Schedule { gpipe, one_f_one_b, interleaved_1f1b, double_strand };
enum class Recompute { none, selective, full };
// Megatron-Core's --recompute-modules, what selective recompute repeats (megatron/core/transformer/
// transformer_config.py:560 at NVIDIA/Megatron-LM d98e8a64dd): core attention; the experts' activation (output
// discarded, experts.py:269); the two pre-norms (transformer_layer.py:475); MLA's up projections and RoPE
// (multi_latent_attention.py:171); a dense layer's MLP (transformer_layer.py:537, MoE layers not); the whole MoE layer
// (moe_layer.py:247); the shared experts (moe_layer.py:252). What each drops and repeats: docs/SIMULATOR.md
// "Activation recompute".
enum class RecomputeModule : std::uint8_t { core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts };
inline constexpr int kRecomputeModuleCount = 7;
// A set of modules, one bit each. A type of its own, not an integer: an `int` passed where a set is asked for (a
// size, a count) is a compile error, not a set of modules.
struct RecomputeModuleMask {
  std::uint8_t bits = 0;  // public: a structural type, usable as a template argument (core/layer.cpp)

  constexpr bool empty() const { return bits == 0; }
  constexpr bool contains_any_of(RecomputeModuleMask other) const { return (bits & other.bits) != 0; }
  constexpr RecomputeModuleMask& operator|=(RecomputeModuleMask other) {
    bits = static_cast<std::uint8_t>(bits | other.bits);
    return *this;
  }
  friend constexpr RecomputeModuleMask operator|(RecomputeModuleMask a, RecomputeModuleMask b) { return a |= b; }
  friend constexpr bool operator==(RecomputeModuleMask, RecomputeModuleMask) = default;
};
constexpr RecomputeModuleMask module_bit(RecomputeModule m) {
  return {static_cast<std::uint8_t>(1U << static_cast<unsigned>(m))};
}

struct Strategy {
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int context_parallel_size = 1;
  int expert_model_parallel_size = 1;
  // Megatron's --expert-tensor-parallel-size: each expert's FC1 columns and FC2 rows split over this many ranks of
  // the folded expert grid (strategies/rank_layout.hpp). 1 (twin's default, unlike Megatron's = TP): whole experts.
  int expert_tensor_parallel_size = 1;
  int data_parallel_size = 1;                      // derived: world / (tp * pp * cp) unless given
  int virtual_pipeline_model_parallel_size = 1;    // model chunks per pipeline rank (interleaved 1F1B)
  bool sequence_parallel = false;
  int micro_batch_size = 1;
  int num_micro_batches = 1;                       // derived: global_batch / (micro_batch * dp)
  int zero_stage = 0;                              // 0 = plain DP, 1 = optimizer states, 2 = + grads, 3 = + params
  Recompute recompute = Recompute::none;
  // Under selective recompute, the modules repeated (Megatron's --recompute-modules, in the order stated); empty, its
  // default ["core_attn"]. Empty under none and full.
  std::vector<RecomputeModule> recompute_modules;
  Schedule schedule = Schedule::one_f_one_b;
  // Megatron's --pipeline-model-parallel-layout: the layers of each virtual stage; empty, the even split
  // (strategies/sharded_parameters.hpp). Only a stated strategy has one: the search splits evenly.
  PipelineLayout pipeline_model_parallel_layout;

  // 64-bit: each size may be up to 2^16 before validity rules them out.
  std::int64_t model_parallel_size() const {
    return std::int64_t{tensor_model_parallel_size} * pipeline_model_parallel_size * context_parallel_size;
  }
  std::int64_t world_size() const { return model_parallel_size() * data_parallel_size; }
  // Stable, human-readable identity, e.g. "tp2.pp4.cp1.ep1.dp4.vpp1.sp.mbs1.z1.rc-none.1f1b" (a layout appends
  // ".layout-" and its pipeline_layout_key; stated recompute modules follow the granularity:
  // "rc-selective-mla_up_proj+mlp"; expert TP above 1 adds ".etpN" after ".epM", so keys of ETP 1 stay).
  std::string key() const;
  bool operator==(const Strategy&) const = default;
};

std::string to_string(Schedule s);
std::string to_string(Recompute r);
std::optional<Schedule> schedule_from_string(std::string_view s);
std::optional<Recompute> recompute_from_string(std::string_view s);
// Every valid spelling, for messages: "gpipe", "1f1b", "interleaved-1f1b", "double-strand".
std::vector<std::string> schedule_names();
std::vector<std::string> recompute_names();
std::string to_string(RecomputeModule m);  // Megatron's spelling: "core_attn", "mla_up_proj", ...
std::optional<RecomputeModule> recompute_module_from_string(std::string_view s);
std::vector<std::string> recompute_module_names();
// The modules a strategy recomputes: none under none and full (full repeats the whole layer instead), the stated
// ones (or core_attn) under selective.
RecomputeModuleMask recomputed_modules(const Strategy& strategy);
inline bool recomputes(RecomputeModuleMask mask, RecomputeModule m) { return mask.contains_any_of(module_bit(m)); }

// What a ZeRO stage keeps only its shard of over the data group, beside the optimizer state (every stage from 1):
// the gradients from stage 2, which is why those stages reduce-scatter every micro-batch's gradients
// (strategies/lowering_emitter.hpp reduces_every_micro_batch), and the weights at stage 3. The lowering, the memory
// model and twin execute's shards read these.
constexpr bool zero_shards_gradients(int zero_stage) { return zero_stage >= 2; }
constexpr bool zero_shards_weights(int zero_stage) { return zero_stage >= 3; }

}  // namespace twin
