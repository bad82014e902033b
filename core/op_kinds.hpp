// The op kinds in one table: for each kind, its name and how every layer serves it — how the simulator
// prices it, how calibration measures it, whether the executor runs it. Adding a kind starts here: the
// switch below has no default and the build treats a missing enumerator as an error (-Werror=switch), and
// so do the switches that act on a kind (cost/kernel_cost.cpp, calibrate/gpu/kernel_benches.cpp,
// executor/op_binding.cpp); tests/cost/op_kind_pricing_test.cpp, tests/gpu/kernel_calibration_test.cpp and
// tests/executor/op_binding_test.cpp check that each layer does what the row says. docs/DESIGN.md, "Adding an op kind", lists the places.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "core/op.hpp"

namespace twin {

// How the simulator prices a kind (cost/kernel_cost.cpp for compute, sim/collectives.hpp for communication).
enum class OpPricing : std::uint8_t {
  gemm,          // the GEMM efficiency model and measured GEMMs
  attention,     // the attention model (fused or unfused) and measured attention kernels
  memory_bound,  // bytes moved over the HBM bandwidth curve, and measured kernels of the kind
  collective,    // NCCL's algorithms over the links, or a measured collective table
  point_to_point,
};

// How calibration measures a kind (calibrate/gpu/).
enum class CalibrationMethod : std::uint8_t {
  gemm_grid,        // cuBLASLt GEMMs over a grid of shapes and the scenario's own
  kernel_bench,     // the executor's own kernel, timed under CUPTI (calibrate/gpu/kernel_benches.cpp)
  nccl_collective,  // nccl-tests-style sweeps of the collective over every group placement
  nccl_p2p,
};

struct OpKindTraits {
  std::string_view name;        // as traces, ops.csv and kernel keys spell it
  OpPricing pricing;
  CalibrationMethod measured_by;
  // Whether twin execute runs the kind; when it does not, executor/op_binding.cpp refuses the plan naming it.
  bool executor_runs;
  // The version of the executor's kernel for the kind: raised whenever the kernel's speed changes, so that a run
  // of an older kernel is not folded into a profile that timed a newer one (core/kernel_revisions.hpp).
  //   1  every kind until 2026-11-24
  //   2  norm_backward (rows in registers, four blocks per multiprocessor), loss_forward (one pass),
  //      loss_backward, embedding_forward and embedding_backward (16-byte accesses; the backward adds into the
  //      bf16 gradient): 2026-11-25
  //   3  norm_backward (the weight kept in registers, the next row's rstd loaded before the block-wide sum; the
  //      residual-fused form adds the skip path's gradient): 2026-11-25
  //   4  norm_backward (rows and rstd copied into shared memory two rows ahead with cp.async, 256 threads):
  //      2026-11-25
  //   2  moe_permute (the copy's token read from the expert order), moe_unpermute (weights optional: the
  //      dispatch's backward): the kernels twin execute runs, 2026-11-25
  int kernel_revision;
};

constexpr OpKindTraits op_kind_traits(OpKind kind) {
  using P = OpPricing;
  using M = CalibrationMethod;
  switch (kind) {
    case OpKind::gemm: return {"gemm", P::gemm, M::gemm_grid, true, 1};
    case OpKind::attention_forward: return {"attention_forward", P::attention, M::kernel_bench, true, 1};
    case OpKind::attention_backward: return {"attention_backward", P::attention, M::kernel_bench, true, 1};
    case OpKind::norm_forward: return {"norm_forward", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::norm_backward: return {"norm_backward", P::memory_bound, M::kernel_bench, true, 4};
    case OpKind::rope_forward: return {"rope_forward", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::rope_backward: return {"rope_backward", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::activation_forward: return {"activation_forward", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::activation_backward: return {"activation_backward", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::elementwise: return {"elementwise", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::embedding_forward: return {"embedding_forward", P::memory_bound, M::kernel_bench, true, 2};
    case OpKind::embedding_backward: return {"embedding_backward", P::memory_bound, M::kernel_bench, true, 2};
    case OpKind::loss_forward: return {"loss_forward", P::memory_bound, M::kernel_bench, true, 2};
    case OpKind::loss_backward: return {"loss_backward", P::memory_bound, M::kernel_bench, true, 2};
    case OpKind::moe_router: return {"moe_router", P::gemm, M::gemm_grid, true, 1};
    case OpKind::moe_permute: return {"moe_permute", P::memory_bound, M::kernel_bench, true, 2};
    case OpKind::moe_unpermute: return {"moe_unpermute", P::memory_bound, M::kernel_bench, true, 2};
    case OpKind::optimizer_step: return {"optimizer_step", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::fp8_cast: return {"fp8_cast", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::fp8_transpose: return {"fp8_transpose", P::memory_bound, M::kernel_bench, true, 1};
    case OpKind::all_reduce: return {"all_reduce", P::collective, M::nccl_collective, true, 1};
    case OpKind::all_gather: return {"all_gather", P::collective, M::nccl_collective, true, 1};
    case OpKind::reduce_scatter: return {"reduce_scatter", P::collective, M::nccl_collective, true, 1};
    case OpKind::all_to_all: return {"all_to_all", P::collective, M::nccl_collective, true, 1};
    case OpKind::send: return {"send", P::point_to_point, M::nccl_p2p, true, 1};
    case OpKind::recv: return {"recv", P::point_to_point, M::nccl_p2p, true, 1};
  }
  return {"unknown", P::memory_bound, M::kernel_bench, false, 1};
}

// Every kind, in declaration order (kLastOpKind, beside the enum, names the last).
inline constexpr int kOpKindCount = static_cast<int>(kLastOpKind) + 1;
constexpr std::array<OpKind, kOpKindCount> all_op_kinds() {
  std::array<OpKind, kOpKindCount> kinds{};
  for (int k = 0; k < kOpKindCount; ++k) kinds[k] = static_cast<OpKind>(k);
  return kinds;
}

// The table names every kind: an enumerator added to OpKind without a row here fails the build twice (the
// switch above, and this check on the names).
static_assert([] {
  for (OpKind kind : all_op_kinds())
    if (op_kind_traits(kind).name == "unknown") return false;
  return true;
}());

}  // namespace twin
