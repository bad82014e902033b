// Selective recompute of Megatron's `layernorm` and `mlp` modules in a dense layer (Megatron-Core's
// --recompute-modules). The layer description says what each module discards (core/layer.cpp: a saved tensor's
// `dropped_by`, and whether it is its block's input), the memory model reads the same entries, and the lowering
// repeats the module's forward where the backward first needs what it discarded (strategies/lowering_layer.cpp
// recompute_before_backward); the repeated ops write where the first ones did. Here the first forward lets go of a
// discarded block input once its block, in a dense layer that input's last forward reader, has run: under `layernorm`
// a pre-norm's output after QKV and FC1, under `mlp` FC1's output after the activation and the activation's output
// after FC2. The repeated FC2's output, which no repeated residual add reads, goes at once.
// twin execute runs these at TP 1 (executor/plan_check.cpp): under TP the repeated forward's collectives and a linear's
// gathered input are not handled here.
#include "executor/gpu/dense_block.hpp"

namespace twin::exec {

void DenseBlock::release_for_module_recompute(const OpPass& p, OpRole done_role) {
  const lowering::RankShapes& shapes = stage_.layout.layout(p.unit).shapes;
  constexpr RecomputeModuleMask kDenseModules = module_bit(RecomputeModule::layernorm) | module_bit(RecomputeModule::mlp);
  if (!shapes.recompute_modules.contains_any_of(kDenseModules)) return;
  // Looked up after the return above: an MoE layer's shared experts have no block in the dense layer's description
  // (2026-12-04 to 12-05 the lookup came first and every shared-expert forward threw), and plans that recompute
  // these modules have none (executor/recompute_check.hpp).
  const layer::Block& done = block(done_role);
  TensorStore& tensors = stage_.tensors;
  if (p.op.recomputed) {
    if (done.role == OpRole::fc2 && shapes.recomputes(RecomputeModule::mlp))
      tensors.release(p.mb, p.unit, {done.output}, p.stream);
    return;
  }
  for (const layer::SavedTensor& saved : done.saved)
    if (saved.is_block_input && shapes.recompute_modules.contains_any_of(saved.dropped_by)) {
      tensors.release(p.mb, p.unit, {done.input}, p.stream);
      return;
    }
}

}  // namespace twin::exec
