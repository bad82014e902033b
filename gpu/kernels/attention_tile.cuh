// Pieces shared by the attention kernels' launchers and bodies: the log-base constants of the
// exp2-domain softmax and the check of the shapes and layouts the kernels can run.
#pragma once
#include "gpu/kernels/common.cuh"

namespace twin::kernels::detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Fills in contiguous strides (a stride of 0) and rejects shapes and layouts the kernels cannot run.
void check_attention_dims(AttentionDims& dims, const void* q, const void* k, const void* v);

}  // namespace twin::kernels::detail
