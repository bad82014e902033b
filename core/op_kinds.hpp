// The op kinds in one table: the enumeration, and for each kind its name and how every layer serves it — how the
// simulator prices it, how calibration measures it, whether the executor runs it, which fields state its size and,
// for communication, which NCCL collective it is. Adding a kind starts here: the switch below has no default and the
// build treats a missing enumerator as an error (-Werror=switch), and so do the switches that act on a compute kind
// (cost/compute_kinds.cpp, calibrate/gpu/kernel_benches.cpp, executor/op_binding.cpp); the switches over communication alone (cost/collective_steps.cpp,
// calibrate/gpu/nccl_bench.cpp) and over a size form (cost/shape_space.cpp) take the row's `collective` and `shape`,
// so a compute kind never reaches them. tests/cost/op_kind_pricing_test.cpp, tests/gpu/kernel_calibration_test.cpp,
// tests/executor/op_binding_test.cpp and tests/tools/op_kind_places_test.py check that each layer does what the row
// says and that no other file switches over kinds. docs/DESIGN.md, "Adding an op kind", lists the places.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace twin {

// What an op is (core/op.hpp holds the fields each kind reads).
enum class OpKind : std::uint8_t {
  // compute
  gemm,                 // gemm: C[m,n] = A[m,k] * B[k,n], `count` independent problems (grouped expert GEMMs)
  attention_forward,    // attention: causal self-attention, flash-style unless the model says unfused
  attention_backward,
  norm_forward,         // rows x cols, RMSNorm or LayerNorm as the op's `normalization` says
  norm_backward,
  rope_forward,         // rows x cols applied to q and k
  rope_backward,
  activation_forward,   // SwiGLU / GeLU over rows x cols (cols = ffn width)
  activation_backward,
  elementwise,          // residual add, dropout, bias: `bytes` moved
  embedding_forward,    // gather rows of the (vocab-parallel) table
  embedding_backward,   // scatter-add into the table's gradient
  loss_forward,         // softmax cross-entropy over rows x vocab-shard
  loss_backward,
  moe_router,           // router logits GEMM + top-k over rows x num_experts
  moe_permute,          // gather tokens by expert: `bytes` moved
  moe_unpermute,
  optimizer_step,       // AdamW over `elements` params, state as optimizer_precision says (+ grad clip scaling)
  fp8_cast,             // Transformer Engine's cast of a bf16 tensor (rows x cols) of the linear `linear` to FP8,
                        // recording its amax and scales; with `fp8_columnwise` also the columnwise copy the
                        // transposed GEMMs read (Hopper: the transpose): `bytes` moved
  fp8_transpose,        // Transformer Engine's transpose of a linear's FP8 tensor (rows x cols, its gathered rows:
                        // `linear`, `linear_tensor`) from its rowwise copy into the columnwise one a GEMM reads,
                        // where SP gathered the rowwise copy alone (per-tensor scales on Hopper): `bytes` moved
  // communication (bytes per nccl-tests: the buffer size of the collective, see sim/collectives.hpp)
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  send,                 // pipeline: matched with the recv of equal p2p_tag on `peer`'s class;
  recv,                 // group context (ring attention): every CP rank sends `bytes` to its ring
                        // neighbour at once, so a context send stands alone, with no recv op
};
// The last kind: a kind added after it must move this too (core/op_kinds.hpp counts kinds up to it).
inline constexpr OpKind kLastOpKind = OpKind::recv;


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

// The NCCL operation a communication kind is, for the switches that act on communication alone (the ring's steps,
// the calibration's NCCL calls).
enum class Collective : std::uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, send, recv };

// The fields that state an op's size (core/op.hpp): a GEMM's `gemm`, an attention block's `attention`, the
// optimizer's `elements`, the `bytes` a copy-like kernel or a collective moves, or a `rows` x `cols` tensor.
enum class ShapeForm : std::uint8_t { gemm, attention, elements, bytes, rows_cols };

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
  ShapeForm shape;
  std::optional<Collective> collective = std::nullopt;  // set exactly for the communication kinds
};

constexpr OpKindTraits op_kind_traits(OpKind kind) {
  using P = OpPricing;
  using M = CalibrationMethod;
  using S = ShapeForm;
  using C = Collective;
  switch (kind) {
    case OpKind::gemm: return {"gemm", P::gemm, M::gemm_grid, true, 1, S::gemm};
    case OpKind::attention_forward: return {"attention_forward", P::attention, M::kernel_bench, true, 1, S::attention};
    case OpKind::attention_backward: return {"attention_backward", P::attention, M::kernel_bench, true, 1, S::attention};
    case OpKind::norm_forward: return {"norm_forward", P::memory_bound, M::kernel_bench, true, 1, S::rows_cols};
    case OpKind::norm_backward: return {"norm_backward", P::memory_bound, M::kernel_bench, true, 4, S::rows_cols};
    case OpKind::rope_forward: return {"rope_forward", P::memory_bound, M::kernel_bench, true, 1, S::rows_cols};
    case OpKind::rope_backward: return {"rope_backward", P::memory_bound, M::kernel_bench, true, 1, S::rows_cols};
    case OpKind::activation_forward: return {"activation_forward", P::memory_bound, M::kernel_bench, true, 1, S::rows_cols};
    case OpKind::activation_backward: return {"activation_backward", P::memory_bound, M::kernel_bench, true, 1, S::rows_cols};
    case OpKind::elementwise: return {"elementwise", P::memory_bound, M::kernel_bench, true, 1, S::bytes};
    case OpKind::embedding_forward: return {"embedding_forward", P::memory_bound, M::kernel_bench, true, 2, S::rows_cols};
    case OpKind::embedding_backward: return {"embedding_backward", P::memory_bound, M::kernel_bench, true, 2, S::rows_cols};
    case OpKind::loss_forward: return {"loss_forward", P::memory_bound, M::kernel_bench, true, 2, S::rows_cols};
    case OpKind::loss_backward: return {"loss_backward", P::memory_bound, M::kernel_bench, true, 2, S::rows_cols};
    case OpKind::moe_router: return {"moe_router", P::gemm, M::gemm_grid, true, 1, S::gemm};
    case OpKind::moe_permute: return {"moe_permute", P::memory_bound, M::kernel_bench, true, 2, S::bytes};
    case OpKind::moe_unpermute: return {"moe_unpermute", P::memory_bound, M::kernel_bench, true, 2, S::bytes};
    case OpKind::optimizer_step: return {"optimizer_step", P::memory_bound, M::kernel_bench, true, 1, S::elements};
    case OpKind::fp8_cast: return {"fp8_cast", P::memory_bound, M::kernel_bench, true, 1, S::bytes};
    case OpKind::fp8_transpose: return {"fp8_transpose", P::memory_bound, M::kernel_bench, true, 1, S::bytes};
    case OpKind::all_reduce: return {"all_reduce", P::collective, M::nccl_collective, true, 1, S::bytes, C::all_reduce};
    case OpKind::all_gather: return {"all_gather", P::collective, M::nccl_collective, true, 1, S::bytes, C::all_gather};
    case OpKind::reduce_scatter: return {"reduce_scatter", P::collective, M::nccl_collective, true, 1, S::bytes, C::reduce_scatter};
    case OpKind::all_to_all: return {"all_to_all", P::collective, M::nccl_collective, true, 1, S::bytes, C::all_to_all};
    case OpKind::send: return {"send", P::point_to_point, M::nccl_p2p, true, 1, S::bytes, C::send};
    case OpKind::recv: return {"recv", P::point_to_point, M::nccl_p2p, true, 1, S::bytes, C::recv};
  }
  return {"unknown", P::memory_bound, M::kernel_bench, false, 1, S::bytes};
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

// Exactly the kinds priced as communication name their collective.
static_assert([] {
  for (OpKind kind : all_op_kinds()) {
    const OpKindTraits t = op_kind_traits(kind);
    const bool communicates = t.pricing == OpPricing::collective || t.pricing == OpPricing::point_to_point;
    if (communicates != t.collective.has_value()) return false;
  }
  return true;
}());

constexpr std::optional<Collective> collective_of(OpKind kind) { return op_kind_traits(kind).collective; }
constexpr ShapeForm shape_form(OpKind kind) { return op_kind_traits(kind).shape; }

}  // namespace twin
