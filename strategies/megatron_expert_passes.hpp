// What Megatron-Core's routed experts run as eager PyTorch kernels beside the fused ones twin prices
// (framework.name "megatron-core"; TEGroupedMLP in megatron/core/transformer/moe/experts.py at NVIDIA/Megatron-LM
// d7288711ba, the core_r0.17.0 commit Megatron-Bridge v0.4.0 and v0.4.1 pin; the same at f8e38858db of 2026-05-29):
//   - The GLU's clamp (the model's activation_func_clamp_value, gpt-oss's 7.0): with bias_activation_fusion (the
//     default) the quick GeGLU runs weighted_bias_quick_geglu_impl (megatron/core/fusions/fused_bias_geglu.py), which
//     clamps FC1's gate and linear halves and concatenates them before its torch.compile'd function; that function
//     is what twin's activation op prices. The clamps and the cat are eager, and run again where moe_act is recomputed.
//   - The experts' FC2 bias (the model's add_bias_linear): TEGroupedMLP._apply_bias adds bias x routing probability
//     to each expert's rows over torch.split and concatenates them, eager, after FC2's grouped GEMM (FC1's bias is in
//     its GEMM: skip_bias_add False).
// twin execute runs neither (its activation kernel clamps, its GEMMs add the biases), nor does a scenario that names
// no framework; pytorch-fsdp2 prices its own eager passes (strategies/pytorch_fsdp2.hpp).
#pragma once
#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {

// Their kernels, per element of the activation's output (each of FC1's halves has as many), bf16:
//   forward: gate.clamp(max) 2+2, linear.clamp(min, max) 2+2, cat of the halves 4+4: 16 bytes, 3 kernels;
//   backward (autograd of those, PyTorch's clamp_backward; the cat's gradient is two views): a zero for each where;
//   the one-sided clamp's mask (input <= bound: 2 read, a bool written 1) and where(mask, dy, 0) 1+2+2 = 8; the
//   two-sided clamp's two masks 3+3, their logical and 1+1+1 and the where 5 = 14; the chunk's gradient, a cat of the
//   two, 4+4: 30 bytes, 9 kernels.
// Per element of FC2's output, bf16 with bf16 probabilities (moe_router_dtype unset):
//   forward, per expert: bias x prob written 2, the rows plus it 2+2+2; then the cat of every expert's rows 2+2: 12
//   bytes, 2 kernels an expert and the cat;
//   backward: the bias's gradient (dy x prob 2+2, summed over rows 2) and the probability's (dy x bias 2+2, summed
//   over columns 2), per expert, and the split's gradient, a cat of the rows' gradients 2+2: 16 bytes, 4 kernels an
//   expert and the cat.
// Measured, they run well below a plain pass's bandwidth (tests/gpu/megatron_expert_eager_check.py, one H200,
// PyTorch 2.11, 2026-12-04, gpt-oss-120b's experts at EP 8: 16 experts x 1,024 rows, hidden and FFN 2,880): the
// clamps read and write halves of rows, strided, and ran at half a copy's bandwidth; the bias's small kernels and
// its column sums add about 3 us a kernel forward and 5 backward. So each is priced as the bytes a plain pass moves
// in the time its kernels took there, per element (counted 16 / 30 and 12 / 16):
inline constexpr EagerPassBytes kMegatronGluClampBytes{32, 66};
inline constexpr EagerPassBytes kMegatronExpertBiasBytes{21, 47};
// The bias's time depends on the rows an expert holds: at 512 rows (32 experts) its backward took 82 bytes' worth per
// element, its forward 25; the price above is the 1,024-row measurement, gpt-oss-120b's at EP 8 and micro-batch 1.

}  // namespace twin::lowering
