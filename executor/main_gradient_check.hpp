// What twin execute runs of the main gradient's dtype (framework.main_grad_dtype; core/framework.hpp): bf16 main
// gradients everywhere, and fp32 ones (Megatron's main_grad under accumulate_allreduce_grads_in_fp32, its default
// for bf16 training) where every kernel that writes or reads a weight's gradient takes fp32: the dense linears (the
// weight-gradient GEMM writes or adds fp32 C), the experts' grouped GEMMs and the router's, norms, biases, embeddings
// and learned positions, AdamW, the gradient norm, and the reductions over data, tensor and embedding groups, which
// move the main gradient as it is kept. Pure CPU code.
#pragma once
#include <string>

#include "core/plan_file.hpp"
#include "strategies/families/plan_graphs.hpp"

namespace twin::exec {

// Throws InputError (file, JSON path, expectation) for a plan whose gradients twin execute cannot keep or reduce as
// the scenario says: a data-parallel reduction in a dtype other than the main gradient's (Megatron reduces its
// main_grad buffer as it is), and fp32 main gradients beside a path that keeps bf16 ones only (MLA, FP8 linears,
// attention sinks, ZeRO >= 2's gradient shards, a hot-switching plan's re-sharding, an asymmetric plan's
// reductions across pipelines).
void check_main_gradient(const Plan& plan, const PlanGraphs& lowered, const std::string& file);

}  // namespace twin::exec
