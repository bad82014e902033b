// The memory model: what each pipeline stage holds per GPU at its peak. Mixed precision with fp32
// master weights and Adam (16 bytes/parameter before sharding), ZeRO 1/2/3 over data parallel ranks,
// activations per layer after Korthikanti et al. 2022 (with TP, SP and recompute), times the
// micro-batches in flight under the schedule, plus communication buffers and workspace.
#pragma once
#include <string>
#include <vector>

#include "core/attention_implementation.hpp"
#include "core/model.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "core/units.hpp"

namespace twin {

struct MemoryBreakdown {
  Bytes parameters = 0;          // bf16 weights held (sharded under ZeRO-3); under FP8 with their FP8 copies and
                                 // scaling state (strategies/fp8_linears.hpp fp8_state_bytes)
  Bytes gradients = 0;           // bf16/fp32 grads held (sharded under ZeRO-2/3)
  Bytes optimizer_states = 0;    // fp32 master + Adam m, v (sharded under ZeRO-1+)
  Bytes activations = 0;         // peak over the schedule
  Bytes communication_buffers = 0;
  Bytes workspace = 0;           // cuBLAS workspace, CUDA context, allocator fragmentation reserve
  // Of the two above: NCCL's buffers and the CUDA context, which the process holds outside its own allocations.
  Bytes outside_allocations = 0;
  Bytes total() const {
    return parameters + gradients + optimizer_states + activations + communication_buffers + workspace;
  }
  // What twin execute's peak counts (executor/gpu/stage_runtime.cpp: its buffers, the parameters and the
  // stream-ordered pool's high mark): the total less what the process holds outside its allocations.
  Bytes allocated() const { return total() - outside_allocations; }
};

struct MemoryEstimate {
  std::vector<MemoryBreakdown> per_stage;
  int worst_stage = 0;
  Bytes peak_bytes() const { return per_stage.empty() ? 0 : per_stage[worst_stage].total(); }
};

// Activation bytes one transformer layer keeps for backward, for one micro-batch on one GPU.
// With tp=1, sp=false, cp=1, recompute none, unfused attention and GPT dropout this is
// s*b*h*34 + 5*a*s^2*b (Korthikanti et al., eq. 1); SwiGLU, GQA and flash attention generalise it.
// NCCL: NCCL_BUFFSIZE (4 MiB) per channel per ring peer (send and receive) over up to 32 channels.
inline constexpr double kNcclBytesPerCommunicator = 32.0 * 2 * 4 * 1024 * 1024;
// The CUDA context and module images (~0.5 GiB), and beside it the cuBLAS workspace on Hopper (32 MiB).
inline constexpr double kCudaContextBytes = 0.5 * kGiB;
inline constexpr double kWorkspaceBytes = 32.0 * 1024 * 1024 + kCudaContextBytes;

// Bytes per parameter of weights, gradients and optimizer states before ZeRO sharding: mixed precision
// keeps bf16 weights, the main gradient (bf16 or fp32: core/framework.hpp main_gradient_bytes) and fp32 master weights
// and Adam moments (12 bytes).
struct StateBytes {
  double weights, gradients, optimizer;
};
StateBytes state_bytes_per_parameter(const TrainingConfig& training, const FrameworkConfig& framework);

// ZeRO-2/3's whole gradients in flight (in the weights' dtype): each micro-batch's backward writes a unit's whole gradients, reduce-scatters
// them into the shard and frees them (lowering_emitter.hpp reduces_every_micro_batch). The activations peak as a
// backward starts, where the unit whose backward runs holds them (the one before it, if any, reduce-scatters beside
// it as activations are freed): 1 x the largest layer's. Nothing under ZeRO-0/1 (whole gradients counted as state) or
// over a data group of one.
double zero_gradients_in_flight_bytes(int zero_stage, int data_group, const StateBytes& per_param,
                                      double largest_unit_parameters);

// `modules`: what selective recompute repeats (recomputed_modules of the strategy; ignored under none and full).
Bytes activation_bytes_per_layer(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                                 int tensor_parallel, bool sequence_parallel, int context_parallel,
                                 Recompute recompute, bool moe_layer = false, int expert_parallel = 1,
                                 bool fp8_layer = false,
                                 RecomputeModuleMask modules = module_bit(RecomputeModule::core_attn),
                                 int expert_tensor_parallel = 1);

// Bytes selective recompute's `modules` add while a layer's backward runs: the largest of one module's dropped tensors,
// made again just before the backward that uses them (core attention's scores excepted, as twin has always priced
// `selective`: the fused kernel's statistics are small, the unfused scores are made block by block).
Bytes recomputed_modules_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                               int tensor_parallel, bool sequence_parallel, int context_parallel,
                               RecomputeModuleMask modules, bool moe_layer = false, int expert_parallel = 1,
                               bool fp8_layer = false, int expert_tensor_parallel = 1);

// Bytes a fully recomputed layer adds while its backward runs: its forward runs again and keeps what an
// unrecomputed layer keeps, less its input (held already), until its backward has used them. Megatron's
// CheckpointFunction.backward (megatron/core/tensor_parallel/random.py) and twin execute's recomputed units alike.
Bytes recomputed_layer_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                             int tensor_parallel, bool sequence_parallel, int context_parallel, bool moe_layer = false,
                             int expert_parallel = 1, int expert_tensor_parallel = 1);

// Bytes of gradients a layer's backward holds at once beside its saved tensors, at its largest step (the MLP's
// activation backward, an MoE layer's in its experts): the layer output's gradient, the activation output's and fc1's
// output's, bf16. twin execute's tensor store holds them until the step that consumes them (Megatron's autograd too).
Bytes layer_backward_gradient_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                                    int tensor_parallel, bool sequence_parallel, int context_parallel,
                                    bool moe_layer = false, int expert_parallel = 1, int expert_tensor_parallel = 1);

// What a layer's backward holds beside its saved tensors: its gradients (above) and what `recompute` makes again
// (recomputed_modules_bytes of `modules` under selective, recomputed_layer_bytes under full).
Bytes layer_backward_held_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                                int tensor_parallel, bool sequence_parallel, int context_parallel, Recompute recompute,
                                bool moe_layer = false, int expert_parallel = 1, bool fp8_layer = false,
                                RecomputeModuleMask modules = module_bit(RecomputeModule::core_attn),
                                int expert_tensor_parallel = 1);

// The most a backward pass holds over what was live when it began: it frees its units (saved bytes `unit_bytes`, in
// forward order) last to first, the output layer's logits before any layer runs again, each holding `held_bytes` until
// freed: max over k of held_bytes[k] less the bytes of the units after k; 0 at least.
double backward_peak_over_live(const std::vector<double>& unit_bytes, const std::vector<double>& held_bytes);

// Bytes the embedding and the output layer keep for their backward, for `rows` tokens (micro-batch times local
// sequence) of a TP group of `tensor_parallel`: the embedding's dropout mask; the final norm's and the output
// projection's inputs and the loss's logits of the vocabulary shard (bf16 under the fused loss, fp32 without).
Bytes embedding_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel);
Bytes output_layer_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel);
// What the output layer's loss holds beside its saved tensors while it runs: the unfused loss's casts hold a bf16
// tensor beside the fp32 copy of the logits (forward the logits until they go, backward their gradient;
// core/unfused_loss.hpp), 2 B per logit of the shard; the fused loss nothing (it writes the gradient over the logits).
Bytes output_layer_held_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel);
// What the last stage keeps per micro-batch whose output-layer weight gradient is deferred to the drain
// (framework.defer_embedding_wgrad_compute): the output projection's input and the logits' gradient (bf16), kept from
// that micro-batch's backward until the stage's last.
Bytes deferred_output_wgrad_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel);
// An MTP depth's beside its transformer layer: its entry's (the shifted tokens' embedding, the two norms' inputs,
// eh_proj's 2h-wide input) and its own output layer's, as output_layer_activation_bytes.
Bytes mtp_edge_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel);

// Bytes per parameter of weights + grads + optimizer states under ZeRO `stage` over `dp` ranks
// (mixed precision Adam: 2 + 2 + 12 = 16 unsharded, as in the ZeRO paper).
double model_state_bytes_per_parameter(int zero_stage, int data_parallel, const std::string& precision);

MemoryEstimate estimate_memory(const Scenario& scenario, const Strategy& strategy);

// "out of memory: 93.1 GiB > 80.0 GiB on stage 0" when it does not fit, else empty.
std::string out_of_memory_reason(const MemoryEstimate& memory, double capacity_GiB);

// Memory check of a uniform strategy on a possibly mixed cluster: each stage against the smallest GPU
// memory among its ranks (the message of out_of_memory_reason for one node group).
std::string uniform_out_of_memory_reason(const Scenario& scenario, const Strategy& strategy,
                                         const MemoryEstimate& memory);

// The scratch `implementation`'s attention backward allocates beyond the default engine's, which the estimate above
// stands for (the scenario names no engine; twin execute's --attention does): the largest over `rc`'s fused attention
// backward ops (core/attention_scratch.hpp); 0 for an engine that needs less.
Bytes attention_scratch_beyond_default(const RankClass& rc, AttentionImplementation implementation);

}  // namespace twin
