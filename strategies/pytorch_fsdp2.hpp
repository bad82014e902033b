// PyTorch FSDP2 with DTensor tensor parallelism as torchtitan runs it (framework.name "pytorch-fsdp2";
// docs/FRAMEWORK.md "PyTorch FSDP2"): what its lowering does beyond twin's Megatron-style ZeRO-3, which already
// gathers a block's weights one block ahead and reduce-scatters its gradients after its backward, as FSDP2's
// prefetch does (pytorch/torchtitan at 018740b, torchtitan/models/llama3/infra/parallelize.py: TP, activation checkpointing,
// torch.compile, then fully_shard per block and on the root, in that order).
//   - FSDP2's copies around its collectives (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py): before a
//     block's all-gather, the fp32 shard cast to the bf16 param_dtype into the gather's input (all_gather_copy_in),
//     after it the gathered bytes copied out into the parameters (split_with_sizes_copy); before the
//     reduce-scatter, the bf16 gradients cast to the reduce_dtype and interleaved per rank (_chunk_cat). They run
//     even over one GPU. The reduce-scatter moves reduce_dtype bytes (fp32 in torchtitan's default policy).
//   - Which weights a backward gathers again: those of blocks freed after their forward (reshard_after_forward),
//     all but the last block's and the root module's (embedding, final norm, output), as the reference script
//     shards them (torchtitan at 018740b reshards the embedding and the last block too, and keeps norm and output).
//   - Eager PyTorch runs a norm, RoPE and SwiGLU as separate kernels, each a pass over memory (the Llama
//     reference's RMSNorm: cast to fp32, square, mean, rsqrt, scale, cast back, weight: seven); torch.compile of
//     a block fuses each into about one kernel, which is what twin's norm, RoPE and activation ops price.
//   - The host: eager PyTorch dispatches every kernel from Python through autograd and, under TP, DTensor's
//     sharding propagation; it issues kernels ahead of the GPU but can fall behind it. Each op of a layer carries
//     its share of the layer's host time per step (Op::dispatch_ns), measured by tests/gpu/pytorch_host_cost.py.
// PyTorch's FullyShardedDataParallel of flat parameters (FSDP1: framework.name "pytorch-fsdp", as Composer and LLM
// Foundry run it; docs/FRAMEWORK.md "PyTorch FSDP1") is lowered the same but for its flat parameters: no copy out
// after a gather, its own passes before a reduce-scatter (fsdp1_reduce_pass_bytes below), and every block freed
// after its forward under FULL_SHARD (only the root module kept). Its eager kernels and host time are FSDP2's.
#pragma once
#include <array>

#include "core/op_graph.hpp"
#include "core/units.hpp"
#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {

// Bytes eager PyTorch moves per element of a norm, RoPE or activation op, forward and backward, beyond what the one
// fused kernel twin prices moves; the lowering that emits the op names which (no kind is inferred here). Counted
// kernel by kernel (bf16 activations, fp32 inside the norm):
//   RMSNorm (the Llama reference's, tests/gpu/pytorch_baseline.py, and Hugging Face's Qwen3 QK-norm alike) forward:
//   x.float() 2+4, pow 4+4, mean 4, x * rsqrt 4+4, cast back 4+2, * weight 2+2 = 36, less 4; backward (autograd of
//   those): 64, less 6.
//   LayerNorm (torch.nn.functional.layer_norm: ATen's native_layer_norm, one kernel) forward: none; backward: the
//   input gradient in one kernel and the weight's and bias's in a second that reads dy and x again, 4.
//   RoPE forward (per q, k element): x * cos 2+2, -x2 1+1, cat 2+2, * sin 2+2, add 2+2+2 = 20, less 4; backward 18,
//   less 4.
//   SwiGLU and GeGLU (act(gate) * up, the reference's and Hugging Face's Gemma's) forward per ffn element: act 2+2,
//   * up 2+2+2 = 10, less 6; backward: the product's two gradients 6+6, act's 2+2+2 = 18, less 10.
//   GeLU (F.gelu, one kernel each way): none.  Squared ReLU (relu, then square: Hugging Face's Nemotron) forward
//   2+2 + 2+2 = 8, less 4; backward: square's 2 * grad * x 2+2 + 2+2+2, relu's 2+2+2 = 16, less 6.
//   gpt-oss's clamped GLU (Hugging Face's GptOssExperts: two clamps, gate * alpha, sigmoid, a product, up + 1, a
//   product) forward 4+4+4+4+6+4+6 = 32, less 6; backward: two products 12+12, sigmoid 6, * alpha 4, the gate's two
//   gradients summed 6, two clamps 12 = 52, less 10.
EagerPassBytes eager_norm_bytes(Normalization normalization);
inline constexpr EagerPassBytes kEagerRopeBytes{20 - 4, 18 - 4};
EagerPassBytes eager_activation_bytes(Activation activation);

// Emits, after `fused` (rows x cols), the eager kernels beyond the fused one (an elementwise op of its role moving
// `extra_bytes_per_element` of fused's rows x cols), under pytorch-fsdp2 or pytorch-fsdp with PyTorch's eager kernels
// (core/framework.hpp pytorch_kernels);
// nothing otherwise.
void emit_eager_passes(Emitter& e, Op fused, std::int64_t extra_bytes_per_element);  // a copy: it emits into the
                                                                                     // graph that held `fused`

// FSDP2's copies of `elements` parameters of a block (this rank's TP shard, all data-parallel ranks' parts):
// all_gather_copy_in reads this rank's fp32 part and writes it as bf16; split_with_sizes_copy reads and writes the
// gathered bf16 weights; _chunk_cat casts the bf16 gradients to the reduce dtype and writes them interleaved.
// FSDP1 (pytorch-fsdp; torch/distributed/fsdp/_runtime_utils.py, _flat_param.py) casts its fp32 flat shard to the
// bf16 shard it gathers (_use_low_precision_shard: copy-in's bytes), gathers into the padded flat parameter the
// weights are views of (no copy out), and before the reduce-scatter casts the whole gradient to the reduce dtype
// where that differs from bf16 and divides it in place by the gradient predivide factor (_div_if_needed, a factor
// above 1 over two GPUs or more): fsdp1_reduce_pass_bytes.
inline std::int64_t fsdp2_copy_in_bytes(std::int64_t elements, int data_group) {
  return (elements + data_group - 1) / data_group * (4 + 2);
}
inline std::int64_t fsdp2_copy_out_bytes(std::int64_t elements) { return elements * (2 + 2); }
inline std::int64_t fsdp2_reduce_copy_bytes(std::int64_t elements, int reduce_bytes) {
  return elements * (2 + reduce_bytes + reduce_bytes + reduce_bytes);
}
inline std::int64_t fsdp1_reduce_pass_bytes(std::int64_t elements, int reduce_bytes, int data_group) {
  const std::int64_t cast = reduce_bytes != 2 ? 2 + reduce_bytes : 0, divide = data_group > 1 ? 2 * reduce_bytes : 0;
  return elements * (cast + divide);
}
// The bytes PyTorch's FSDP moves over `elements` gradients before their reduction, 0 where it moves none: FSDP2's
// _chunk_cat at ZeRO-3 (even over one GPU), FSDP1's cast and predivide at ZeRO-2 and 3 (FULL_SHARD and SHARD_GRAD_OP
// both reduce through _reduce_grad); nothing under another framework.
inline std::int64_t fsdp_reduce_pass_bytes(const RankShapes& s, std::int64_t elements) {
  if (!s.pytorch_fsdp) return 0;
  if (s.flat_parameters) return s.zero_stage >= 2 ? fsdp1_reduce_pass_bytes(elements, s.reduce_bytes, s.data_group) : 0;
  return s.zero_stage == 3 ? fsdp2_reduce_copy_bytes(elements, s.reduce_bytes) : 0;
}
// One of those copies or passes: an elementwise op of role param_gather or grad_reduce moving `bytes` of
// `parameter_unit`.
Op fsdp_copy(OpRole role, Stream stream, std::int64_t bytes, std::int32_t parameter_unit);

// The host's time per transformer layer and step, and per step beside the layers, measured unprofiled at widths
// where the host bounds the step (hidden 256, sequence 128: tests/gpu/pytorch_host_cost.py, 4 H200s with their
// host, PyTorch 2.11, 2026-11-28; docs/accuracy/pytorch-fsdp2-4xH200/host_cost.jsonl). Per layer: the synchronised
// step's time per layer (6 layers less 2, over 4), split over forward, backward (with what checkpointing
// recomputes) and the optimizer in the proportions of their host times; fixed: the step at 2 layers less 2 layers'
// (the embedding, the output layer, the loss, gradient clipping and the optimizer's launch), at least 0.
struct PytorchHostCost {
  int tp = 1;                  // the tensor-parallel size measured
  bool full_recompute = false;
  bool compiled = false;
  TimeNs forward_ns = 0, backward_ns = 0, optimizer_ns = 0;  // per layer
  TimeNs fixed_ns = 0;                                       // per step
};
inline constexpr std::array<PytorchHostCost, 6> kPytorchHostCosts = {{
    {1, false, false, 3'423'000, 3'481'000, 631'000, 1'072'000},
    {1, true, false, 4'497'000, 5'364'000, 594'000, 3'421'000},
    {1, false, true, 2'047'000, 3'320'000, 570'000, 6'169'000},
    {2, false, false, 8'354'000, 13'920'000, 614'000, 0},
    {4, false, false, 4'968'000, 11'462'000, 208'000, 8'968'000},
    {2, true, true, 3'059'000, 4'796'000, 731'000, 5'776'000},
}};

// The measured configuration nearest to (tp, recompute, compiled): the same compile, then the same recompute, then
// the nearest TP size (selective recompute counts as none: it repeats one op's forward).
const PytorchHostCost& pytorch_host_cost(int tp, Recompute recompute, bool compiled);

// Gives every op of `rc` its dispatch time: a layer's host time of its pass (forward; backward with its recomputed
// forward) spread evenly over the pass's ops that the host issues in line (not the data-parallel stream's gathers,
// reductions and copies, nor the copy out of a gather, which FSDP2's hooks issue beside them), the optimizer's over the optimizer phase, the fixed time
// over the ops outside the layers. Every layer's passes alike, so repeated passes stay equal to their originals.
void assign_pytorch_dispatch(RankClass& rc, const RankShapes& shapes);

}  // namespace twin::lowering
