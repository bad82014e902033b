// The interpreter's handler of a Ulysses layer's all-to-alls (DeepSpeed-Ulysses): the tensor the op names, between
// the sequence layout (this GPU's rows, every head) and the heads layout (the group's rows, this GPU's heads). It
// keeps no state between ops: one function serves both actions (ulysses_to_heads, ulysses_to_sequence).
#pragma once
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/tensor_store.hpp"

namespace twin::exec {

// `p`'s all-to-all over `layout`'s Ulysses group (its `tensor` communicator), the tensors in `tensors`.
void ulysses_exchange(const OpPass& p, const UnitLayout& layout, TensorStore& tensors);

}  // namespace twin::exec
