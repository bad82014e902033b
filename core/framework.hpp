// What the training framework does that changes the timeline, in Megatron-LM's names (scenario
// "framework" section). The defaults are what Megatron-LM's own current training recipe turns on
// (examples/llama/train_llama3_8b_h100_fp8.sh at NVIDIA/Megatron-LM d98e8a6: --use-distributed-optimizer
// --overlap-grad-reduce --overlap-param-gather --cross-entropy-loss-fusion; gradient accumulation fusion is on
// unless --no-gradient-accumulation-fusion; no --tp-comm-overlap; --cp-comm-type p2p, Megatron's default);
// Megatron's argparse defaults leave the two overlaps off, and a scenario that describes such a run (every run
// before 2023) says so. The recipe's --attention-backend fused is not the model's default (flash): docs/FRAMEWORK.md
// "Defaults" says why, and how the lowering and the memory model follow each field.
#pragma once
#include <algorithm>
#include <optional>

#include "core/workload.hpp"

namespace twin {

// How context parallelism exchanges keys and values (Megatron's --cp-comm-type): "p2p" passes them around
// the CP ring beside the attention blocks; "all_gather" gathers them all first, then runs the rank's two
// query chunks against the keys they see (Llama 3's choice, Dubey et al. 2024, section 3.3.2).
enum class CpCommType { p2p, all_gather };

// Which framework shards the weights under ZeRO stage 3. "megatron": Megatron-style FSDP (the weights of a layer
// gathered one layer ahead beside the compute, gradients reduce-scattered once per iteration). "deepspeed":
// DeepSpeed's stage 3 as it ran in April 2021 (microsoft/DeepSpeed c83e49f, deepspeed/runtime/zero/stage3.py and
// partition_parameters.py; docs/FRAMEWORK.md): every sub-module's fetch ends in torch.cuda.synchronize(), so a
// layer's compute waits for everything issued before it, the gradient reduction of the layer before included;
// gradients are all-reduced (contiguous_gradients off, its stage-3 default) in every micro-batch's backward; under
// full recompute the recomputed forward gathers the weights again, and the backward gathers those again whose
// reuse lies further than stage3_max_reuse_distance (1e9 elements).
enum class ZeroImplementation { megatron, deepspeed };

// How an MoE layer moves its token copies to the experts (Megatron's --moe-token-dispatcher-type): "alltoall"
// sorts each rank's copies by expert and exchanges them over EP; "allgather" gathers the EP group's tokens on every
// rank, each picking its experts' copies, and reduce-scatters the combined output (strategies/lowering_moe.cpp);
// "flex" (MoEFlexTokenDispatcher over DeepEP or HybridEP) sends each token once to every rank that holds one of its
// experts, and across nodes once to every node, forwarded there over NVLink (sim/collectives.hpp).
enum class MoeTokenDispatcher { alltoall, allgather, flex };

struct FrameworkConfig {
  // Data-parallel gradient reduction per bucket (one layer) as soon as its last micro-batch's backward has
  // produced it, beside the remaining backward; off: every bucket after the whole backward.
  bool overlap_grad_reduce = true;
  // Distributed optimizer (ZeRO 1/2): the updated parameters are all-gathered per bucket beside the next
  // iteration's forward, each layer's first forward waiting only for its own bucket; off: all gathered
  // after the optimizer step, before the iteration ends.
  bool overlap_param_gather = true;
  // Transformer Engine userbuffers: with sequence parallelism, the TP all-gather before a column-parallel
  // GEMM and the reduce-scatter after a row-parallel GEMM run in TP chunks pipelined with the GEMM's chunks.
  bool tp_comm_overlap = false;
  // The weight-gradient GEMM accumulates into the fp32 main gradient; off: it writes a bf16 gradient that a
  // separate kernel adds into the fp32 buffer (one more memory-bound op per linear layer and micro-batch).
  bool gradient_accumulation_fusion = true;
  // The vocabulary-parallel cross-entropy in one kernel (Megatron's --cross-entropy-loss-fusion); off: as
  // Megatron wrote it before, on fp32 logits in separate passes (cast, max, subtract, exp, sum, divide;
  // backward scale and cast back), 36 more bytes per logit forward and 10 more backward.
  bool cross_entropy_loss_fusion = true;
  // twin's own (Megatron has no such switch: its bias-dropout-add kernel adds each residual in a pass of its
  // own, and autograd adds the skip path's gradient in another): each residual add runs inside a kernel that
  // is there anyway. Forward, the row-parallel GEMM's epilogue adds the residual stream (cuBLASLt D = A B + C)
  // where nothing comes between them (TP 1); backward, the norm backward that reads the stream adds the skip
  // path's gradient to its input gradient. Only without hidden dropout or post norms (they sit between them).
  bool residual_fusion = false;
  // Megatron's --use-distributed-optimizer, when the scenario gives it: true is ZeRO stage 1 (optimizer
  // states sharded, gradients reduce-scattered), false ZeRO 0; it must agree with the strategy's
  // zero_stage, and in a search it restricts the zero_stage list. Absent: zero_stage alone decides.
  std::optional<bool> use_distributed_optimizer;
  CpCommType cp_comm_type = CpCommType::p2p;
  ZeroImplementation zero_implementation = ZeroImplementation::megatron;
  MoeTokenDispatcher moe_token_dispatcher_type = MoeTokenDispatcher::alltoall;
  // Megatron's --overlap-moe-expert-parallel-comm: the combined 1F1B schedule, each steady-state forward of one
  // micro-batch run layer by layer beside another's backward, so that one's EP dispatch and combine all-to-alls hide
  // under the other's compute (strategies/lowering_combined_1f1b.cpp). --delay-wgrad-compute: the experts' weight
  // gradients run after the dispatch backward is issued, so that it hides under them too.
  bool overlap_moe_expert_parallel_comm = false;
  bool delay_wgrad_compute = false;
  // Megatron-LM's scatter/gather of pipeline tensors (Narayanan et al. 2021, section 4.1; --no-scatter-gather-
  // tensors-in-pipeline turned it off, on by default from April 2021 until Megatron-Core dropped it): without
  // sequence parallelism each TP rank sends only its 1/tp share of the activation or gradient to the next stage,
  // and the receiver all-gathers the shares over TP (NVLink) before using it. Off: every TP rank sends the whole
  // tensor, as Megatron-Core does. DeepSpeed's pipeline engine partitions its pipeline tensors over the model-parallel
  // group the same way (is_pipe_partitioned, is_grad_partitioned at microsoft/DeepSpeed 56c522386), which this switch
  // states for BLOOM's published rows.
  bool scatter_gather_tensors_in_pipeline = false;
  // Megatron-Core's --defer-embedding-wgrad-compute (ModelParallelConfig, NVIDIA/Megatron-LM d98e8a64dd): on the last
  // pipeline stage the output layer keeps each micro-batch's input and output gradient instead of running its
  // weight-gradient GEMM, and runs those GEMMs after the stage's last backward (finish_embedding_wgrad_compute, before
  // finalize_model_grads), inside the pipeline's cooldown. --wgrad-deferral-limit: the first that many micro-batches
  // are deferred, the later ones computed at once (0: every one). Megatron refuses it without pipeline parallelism and
  // without gradient accumulation fusion; docs/FRAMEWORK.md says where twin applies it.
  bool defer_embedding_wgrad_compute = false;
  int wgrad_deferral_limit = 0;
  // DeepSpeed's BF16_Optimizer under its pipeline engine (microsoft/DeepSpeed 56c522386, April 2022, the optimizer
  // BLOOM-176B trained with; docs/FRAMEWORK.md): bf16 training whose fp32 gradient buffer is neither sharded nor
  // reduce-scattered. Once the backward has finished, _bf16_reduce_grads all-reduces the whole buffer over the data
  // group in communication_data_type (bf16 for bf16 at ZeRO stage 0: cast down before, scaled by 1/dp and copied
  // back after), tied weights' fp32 gradients are all-reduced over their group, the gradient norm reads the whole
  // buffer, and step() updates the rank's 1/dp of the fp32 weights and all-gathers the bf16 weights: twin's ZeRO
  // stage 1 with an all-reduce where the distributed optimizer reduce-scatters. Needs bf16, zero_stage 1, both
  // overlaps off and a dense model.
  bool deepspeed_bf16_optimizer = false;
  // Which framework's training the scenario describes (core/workload.hpp): the prediction prices its ops with the
  // profile's times, and twin warns when the profile measured another framework. Absent: not said.
  std::optional<FrameworkName> name;
  // PyTorch FSDP's own settings, with name pytorch-fsdp2 or pytorch-fsdp only (strategies/pytorch_fsdp2.hpp):
  // torch.compile of each block; whether a block's gathered weights are freed after its forward and gathered again
  // for its backward (FSDP2's reshard_after_forward, FSDP1's FULL_SHARD against SHARD_GRAD_OP).
  bool compile = false;
  bool reshard_after_forward = true;
  // Transformer Engine's modules for the blocks' norms, RoPE and activations under PyTorch's FSDP (NeMo AutoModel's
  // `backend: rms_norm te, linear te, attn te`): each one fused kernel, as compile gives them, the host's time per
  // layer eager PyTorch's.
  bool transformer_engine_kernels = false;
  // The bytes per element the data-parallel gradient reduction moves (framework.reduce_dtype: float32 4, bfloat16
  // 2), when the scenario states it. Absent: the framework's default, gradient_reduce_bytes() below.
  std::optional<int> reduce_dtype_bytes;
  // The bytes per element of the main gradient, the buffer weight gradients accumulate into over a step's
  // micro-batches (framework.main_grad_dtype: float32 4, bfloat16 2, a 16-bit one in fp16 training too), when the
  // scenario states it. Absent: main_gradient_bytes() below.
  std::optional<int> main_grad_dtype_bytes;
  // Whether full recompute runs a layer's forward again only up to the last tensor its backward keeps
  // (framework.checkpoint_early_stop), when the scenario states it. Absent: recompute_stops_early() below.
  std::optional<bool> checkpoint_early_stop;
  bool operator==(const FrameworkConfig&) const = default;
};

// The bytes per element of the data-parallel gradient reduction: what the scenario states, else the framework's own
// default. pytorch-fsdp2: float32 (torchtitan's MixedPrecisionPolicy reduce_dtype); pytorch-fsdp: 16-bit (FSDP1's
// MixedPrecision reduces in param_dtype unless told; Composer's DEFAULT says float32, which its rows state).
// Otherwise 16-bit, as twin execute reduces (executor/gpu/optimizer_run.cpp) and NeMo's performance recipes run
// (grad_reduce_in_fp32 False); Megatron-LM itself reduces bf16 training's gradients in fp32 unless
// --grad-reduce-in-bf16 (arguments.py: "bfloat16 requires gradient accumulation and all-reduce to be done in fp32"),
// which a scenario describing such a run states.
inline int gradient_reduce_bytes(const FrameworkConfig& f) {
  if (f.reduce_dtype_bytes) return *f.reduce_dtype_bytes;
  return f.name == FrameworkName::pytorch_fsdp2 ? 4 : 2;
}

// The bytes per element of the main gradient: what the scenario states, else the reduction's, as Megatron's DDP
// allocates main_grad (fp32 exactly when it accumulates and all-reduces in fp32: accumulate_allreduce_grads_in_fp32,
// since 2023 grad_reduce_in_fp32), except under DeepSpeed's BF16_Optimizer, which accumulates into fp32 gradients and
// all-reduces them in bf16. Other frameworks that keep an fp32 buffer beside a 16-bit reduction (NeMo 22.08's Apex
// DistributedFusedAdam) state it.
inline int main_gradient_bytes(const FrameworkConfig& f) {
  if (f.main_grad_dtype_bytes) return *f.main_grad_dtype_bytes;
  return f.deepspeed_bf16_optimizer ? 4 : gradient_reduce_bytes(f);
}

// Whether full recompute stops early: PyTorch's non-reentrant torch.utils.checkpoint (its default early stop, since
// PyTorch 2.1) stops running a checkpointed block again once every tensor the block's backward keeps has been made
// again, so a layer's trailing ops (fc2 and the residual add after the MLP's activation) do not run twice; Megatron's
// full recompute, DeepSpeed's and reentrant checkpoints run the whole forward again. Measured on one H200
// (tests/gpu/recompute_cost_pytorch.py: the recompute cost 0.75-0.84 of a forward with it, 0.97-1.14 without;
// docs/VALIDATION.md "PyTorch's checkpoint stops early"). What the scenario states, else the framework's: true under
// pytorch-fsdp2 and pytorch-fsdp (torchtitan wraps each block in PyTorch's non-reentrant checkpoint, the default of
// torch's checkpoint_wrapper that FSDP1 users apply), false otherwise.
inline bool recompute_stops_early(const FrameworkConfig& f) {
  return f.checkpoint_early_stop.value_or(pytorch_fsdp(f.name));
}

// The kernels a PyTorch FSDP plan runs its norms, RoPE and activations with, and the host time it pays: PyTorch's
// eager kernels; torch.compile's (framework.compile: one fused kernel each, compile's host time); Transformer Engine's
// (framework.transformer_engine_kernels: one fused kernel each, eager PyTorch's host time). compile wins where both
// are stated: Inductor compiles the blocks around whatever modules they hold.
enum class PytorchKernels { eager, compiled, transformer_engine };
inline PytorchKernels pytorch_kernels(const FrameworkConfig& f) {
  if (f.compile) return PytorchKernels::compiled;
  return f.transformer_engine_kernels ? PytorchKernels::transformer_engine : PytorchKernels::eager;
}

// How many of a step's `micro_batches` have their output-layer weight gradients deferred on the last stage of a
// pipeline of `pipeline_stages` (framework.defer_embedding_wgrad_compute): the first wgrad_deferral_limit of them,
// every one when the limit is 0; none without the switch or without pipeline parallelism.
inline int deferred_output_wgrad_micro_batches(const FrameworkConfig& f, int pipeline_stages, int micro_batches) {
  if (!f.defer_embedding_wgrad_compute || pipeline_stages < 2) return 0;
  return f.wgrad_deferral_limit == 0 ? micro_batches : std::min(f.wgrad_deferral_limit, micro_batches);
}

}  // namespace twin
