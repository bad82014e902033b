// The interpreter's handler of multi-latent attention layers (DeepSeek-V3): each op of an MLA layer's block
// (Action::mla_step) runs its one step of MlaAttention (executor/gpu/mla_attention.hpp) on its micro-batch's tensors
// in the unit's slot, as the dense block's ops do: the input norm's output in, the attention output the projection
// reads out (the layer description's tensors, core/layer.cpp's mla_attention block), the saved tensors as the
// block's statistics, its rows between steps in their own forms (executor/gpu/tensor_store.hpp). Weights from the
// layer's parameter unit. TP 1 and CP 1 (executor/plan_check.cpp).
#pragma once
#include <cuda_runtime.h>

#include "executor/gpu/mla_attention.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/gpu/tensor_store.hpp"

namespace twin::exec {

struct MlaStage {
  const StageLayout& layout;
  StageParameters& parameters;
  TensorStore& tensors;
  gpu::Attention& attention;  // the dense block's cuDNN handle
};

class MlaBlock {
 public:
  // Builds the RoPE table of the rope part on `stream`. Throws for a stage whose layers' shapes differ.
  MlaBlock(const MlaStage& stage, cudaStream_t stream);
  void run(const OpPass& p);

 private:
  // The op's step's tensors, made where the step writes them first.
  MlaStepTensors tensors_of(const OpPass& p, MlaStep step);
  // What the step leaves that no later step reads: released on its stream.
  void release_after(const OpPass& p, MlaStep step);

  MlaStage stage_;
  MlaAttention attention_;
};

}  // namespace twin::exec
