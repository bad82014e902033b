// Selective recompute of Megatron's `layernorm` and `mlp` modules in a dense layer (Megatron-Core's
// --recompute-modules; core/layer.cpp's saved tensors say what each discards). The lowering repeats the module's
// forward where the backward first needs what it discarded (strategies/lowering_layer.cpp recompute_before_backward),
// and the repeated ops write where the first ones did; here the first forward lets go of those tensors once their
// last forward reader has run, so that the step holds what the memory model counts:
//   layernorm: a pre-norm's output (QKV's and FC1's input), after QKV's and FC1's forward GEMM;
//   mlp: FC1's output after the activation, the activation's output after FC2's forward GEMM, and the repeated
//        FC2's output at once (the residual add that read the first one does not run again).
// twin execute runs these at TP 1 (executor/plan_check.cpp): under TP the repeated forward's collectives and a linear's
// gathered input are not handled here.
#include "executor/gpu/dense_block.hpp"

namespace twin::exec {

void DenseBlock::release_for_module_recompute(const OpPass& p, const LinearTensors& t) {
  const lowering::RankShapes& shapes = stage_.layout.layout(p.unit).shapes;
  const OpRole subject = p.binding.subject;
  TensorStore& tensors = stage_.tensors;
  if (p.op.recomputed) {
    if (subject == OpRole::fc2 && shapes.recomputes(RecomputeModule::mlp))
      tensors.release(p.mb, p.unit, t.output, p.stream);
    return;
  }
  const bool norm_output_read = subject == OpRole::qkv_projection || subject == OpRole::fc1;
  if (norm_output_read && shapes.recomputes(RecomputeModule::layernorm)) tensors.release(p.mb, p.unit, t.input, p.stream);
  if (subject == OpRole::fc2 && shapes.recomputes(RecomputeModule::mlp)) tensors.release(p.mb, p.unit, t.input, p.stream);
}

void DenseBlock::release_activation_input_for_mlp_recompute(const OpPass& p) {
  if (p.op.recomputed || !stage_.layout.layout(p.unit).shapes.recomputes(RecomputeModule::mlp)) return;
  stage_.tensors.release(p.mb, p.unit, {layer::block_of(OpRole::activation).input}, p.stream);
}

}  // namespace twin::exec
