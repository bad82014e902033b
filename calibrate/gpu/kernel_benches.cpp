// Shapes of the op vocabulary mapped onto the executor's kernels, each run through its kind's entry. Where an op's fields leave a kernel
// parameter open (RoPE's q/k head split, the MoE row width), the choice moves the same bytes.
#include "calibrate/gpu/kernel_benches.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "calibrate/gpu/bench_builder.hpp"
#include "core/op_kinds.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "gpu/op_kernels.hpp"

namespace twin::gpu {
namespace {

namespace k = twin::kernels;
using B = k::bf16;

constexpr std::int64_t kVocabShardRows = 32000;  // embedding table rows of the timed shard

// A residual's bias-dropout-add as the executor runs it (executor/gpu/dense_block_residual.cpp), of the op's rows
// and columns: forward the add through a drawn mask; backward the add, then the branch's gradient through the mask
// (drawn once before timing).
std::optional<KernelBench> dropout_bench(Builder& x, const Op& op, std::string& why_not) {
  const std::int64_t rows = op.rows, cols = op.cols, n = rows * cols;
  if (rows <= 0 || cols <= 0 || cols % 8 != 0) {
    why_not = "a dropout's rows x cols (cols a multiple of 8) not stated";
    return std::nullopt;
  }
  B *a = x.b(x.bf16(n)), *b = x.b(x.bf16(n)), *out = x.b(x.raw(n * 2));
  auto* mask = static_cast<std::uint8_t*>(x.v(x.raw(static_cast<std::size_t>(n))));
  const auto runs = std::make_shared<std::vector<k::DropoutRun>>(1, k::DropoutRun{0, rows, 0});
  Elementwise call{a, b, out, n, {{op.dropout, x.seed, 0}, mask, runs->data(), 1}, cols};
  if (op.phase == Phase::backward) {
    launch(call, x.stream);  // the mask the backward reads
    call.a = out;
    call.out = out;
    call.dropped = x.b(x.raw(n * 2));
  }
  return bench_of(x, call, runs);
}

int head_dim_for(std::int64_t cols) { return cols % 128 == 0 ? 128 : cols % 64 == 0 ? 64 : 0; }

// Each kind's bench below reads the op's rows and columns (positive: make_kernel_bench checks) or its own fields.
// Buffer data pointers stay put when the vector of buffers grows: lambdas capture them by value.

std::optional<KernelBench> norm_forward_bench(Builder& x, const Op& op) {
  const std::int64_t rows = op.rows, cols = op.cols, n = rows * cols;
  B *in = x.b(x.bf16(n)), *w = x.b(x.bf16(cols)), *bias = x.b(x.bf16(cols)), *y = x.b(x.raw(n * 2));
  float *mean = x.f(x.raw(rows * 4)), *rstd = x.f(x.raw(rows * 4));
  return bench_of(x, NormForward{op.normalization, in, w, bias, y, mean, rstd, rows, cols});
}

std::optional<KernelBench> norm_backward_bench(Builder& x, const Op& op, std::string& why_not) {
  const std::int64_t rows = op.rows, cols = op.cols, n = rows * cols;
  const bool ln = op.normalization == Normalization::layernorm;
  if (cols * 4 * (ln ? 2 : 1) > 227 * 1024) {
    why_not = "cols too wide for the norm kernels";
    return std::nullopt;
  }
  B *dy = x.b(x.bf16(n)), *in = x.b(x.bf16(n)), *w = x.b(x.bf16(cols)), *dx = x.b(x.raw(n * 2));
  float *mean = x.f(x.f32(rows)), *rstd = x.f(x.f32(rows));
  B* grad = x.b(x.bf16(2 * cols));
  float* partials = x.f(x.raw(2 * k::norm_partial_floats(rows, cols) * 4));
  B* skip = op.fuses_residual ? x.b(x.bf16(n)) : nullptr;  // residual fusion: dx adds the stream's gradient
  // As a later micro-batch's runs: its weight gradient adds to the one before.
  return bench_of(x, NormBackward{op.normalization, dy, in, w, mean, rstd, skip, dx, partials, grad, grad + cols,
                                  /*accumulate=*/true, rows, cols});
}

std::optional<KernelBench> rope_bench(Builder& x, const Op& op, std::string& why_not) {
  const std::int64_t rows = op.rows, cols = op.cols;
  const int d = head_dim_for(cols);
  if (d == 0) {
    why_not = "cols is no multiple of a 64 or 128 head dimension";
    return std::nullopt;
  }
  const int heads = static_cast<int>(cols / d), kv = heads / 2;
  B *q = x.b(x.bf16(rows * (heads - kv) * d)), *kp = x.b(x.bf16(rows * std::max(kv, 1) * d));
  const std::int64_t seq = std::min<std::int64_t>(rows, 8192);
  auto* table = static_cast<float2*>(x.v(x.raw(seq * d / 2 * 8)));
  k::rope_build_table(table, seq, d, 10000.f, x.stream);
  const k::RopeShape shape{rows, seq, heads - kv, kv, d, 0, 0};
  if (op.kind == OpKind::rope_forward) return bench_of(x, RopeForward{q, kp, table, shape});
  return bench_of(x, RopeBackward{q, kp, table, shape});
}

std::optional<KernelBench> activation_bench(Builder& x, const Op& op, const KernelModelFacts& facts) {
  const std::int64_t rows = op.rows, cols = op.cols, n = rows * cols;
  const Activation activation = op.activation;  // the op says which function, and its key too
  const bool gated = is_gated(activation);
  B *in = x.b(x.bf16(gated ? 2 * n : n)), *dout = x.b(x.bf16(n)), *out = x.b(x.raw((gated ? 4 : 2) * n));
  const k::GluTerms glu = glu_terms(facts.glu_linear_offset, facts.activation_func_clamp_value);
  if (op.kind == OpKind::activation_forward) return bench_of(x, ActivationForward{activation, in, out, rows, cols, glu});
  return bench_of(x, ActivationBackward{activation, in, dout, out, rows, cols, glu});
}

std::optional<KernelBench> elementwise_bench(Builder& x, const Op& op, std::string& why_not) {
  if (op.dropout > 0) return dropout_bench(x, op, why_not);  // a residual's bias-dropout-add, rows x cols
  const std::int64_t count = op.bytes / 6;  // residual add: 2 reads and 1 write of bf16
  if (count <= 0) {
    why_not = "bytes too small";
    return std::nullopt;
  }
  B *a = x.b(x.bf16(count)), *b = x.b(x.bf16(count)), *out = x.b(x.raw(count * 2));
  return bench_of(x, Elementwise{a, b, out, count});
}

std::optional<KernelBench> embedding_bench(Builder& x, const Op& op) {
  const std::int64_t rows = op.rows, cols = op.cols, n = rows * cols;
  std::int32_t* tokens = x.idx(x.indices(rows, kVocabShardRows));
  // Hidden dropout (the op's): over every row, its mask drawn forward and read backward.
  const auto runs = std::make_shared<std::vector<k::DropoutRun>>(1, k::DropoutRun{0, rows, 0});
  auto* mask = op.dropout > 0 ? static_cast<std::uint8_t*>(x.v(x.raw(static_cast<std::size_t>(n)))) : nullptr;
  const HiddenDropout dropout{{op.dropout, x.seed, 0}, mask, runs->data(), 1};
  if (op.kind == OpKind::embedding_forward) {
    B *table = x.b(x.bf16(kVocabShardRows * cols)), *out = x.b(x.raw(n * 2));
    EmbeddingForward call{tokens, table, out, rows, cols, 0, kVocabShardRows};
    call.dropout = dropout;
    return bench_of(x, call, runs);
  }
  B* dy = x.b(x.bf16(n));
  B* grad = x.b(x.bf16(kVocabShardRows * cols));
  const std::size_t ws_bytes = k::embedding_backward_workspace_bytes(rows);
  void* ws = x.v(x.raw(ws_bytes));
  EmbeddingBackward call{tokens, dy, grad, ws, ws_bytes, false, rows, cols, 0, kVocabShardRows};
  call.dropout = dropout;
  if (mask) call.dropped_dy = x.b(x.raw(n * 2));  // not dy: repeated launches would scale it up without end
  return bench_of(x, call, runs);
}

std::optional<KernelBench> loss_bench(Builder& x, const Op& op, const KernelModelFacts& facts, std::string& why_not) {
  const std::int64_t rows = op.rows, cols = op.cols, n = rows * cols;
  // The op says whether its logits are capped (its key too); the model, at what.
  if (op.softcapped_logits && facts.final_logit_softcap <= 0) {
    why_not = "no cap for capped logits";
    return std::nullopt;
  }
  if (op.softcapped_logits && op.unfused_loss) {
    why_not = "the unfused loss caps no logits";
    return std::nullopt;
  }
  B *logits = x.b(x.bf16(n)), *dlogits = x.b(x.raw(op.kind == OpKind::loss_backward ? n * 2 : 2));
  std::int32_t* targets = x.idx(x.indices(rows, cols));
  float *max = x.f(x.raw(rows * 4)), *sum = x.f(x.raw(rows * 4)), *target = x.f(x.raw(rows * 4));
  float *loss = x.f(x.raw(rows * 4)), *loss_sum = x.f(x.raw(4));
  const auto softcap = static_cast<float>(op.softcapped_logits ? facts.final_logit_softcap : 0);
  LossForward statistics{logits, targets, max, sum, target, loss, loss_sum, rows, cols, 0, softcap};
  // Unfused (Op::unfused_loss): Megatron's passes over an fp32 copy of the logits, which the backward turns into
  // the gradient in place (repeated launches keep transforming it; the passes' bytes stay the same).
  if (op.unfused_loss) statistics.fp32_logits = x.f(x.raw(static_cast<std::size_t>(n) * 4));
  launch(statistics, x.stream);  // the backward reads real statistics
  // The vocabulary whole, as on one GPU: a split one's all-reduces run after the statistics, on the TP stream.
  if (op.kind == OpKind::loss_forward) return bench_of(x, statistics);
  LossBackward backward{logits, max, sum, targets, dlogits, 1.f / rows, rows, cols, 0, softcap};
  backward.fp32_softmax = statistics.fp32_logits;
  return bench_of(x, backward);
}

std::optional<KernelBench> moe_bench(Builder& x, const Op& op, const KernelModelFacts& facts, std::string& why_not) {
  const std::int64_t width = facts.hidden, top_k = std::max(facts.top_k, 1);
  const std::int64_t routed = op.bytes / (4 * width);  // lowering: read + write of routed bf16 rows
  const std::int64_t tokens = routed / top_k;
  if (width <= 0 || tokens <= 0) {
    why_not = "bytes too small for one routed token";
    return std::nullopt;
  }
  B *in = x.b(x.bf16(routed * width)), *out = x.b(x.raw(routed * width * 2));
  const int kk = static_cast<int>(top_k);
  const bool backward = op.phase == Phase::backward;
  // Row r of expert order copies token order[r] / top_k; routed_row is the inverse (any permutation times alike).
  std::int32_t *order = x.idx(x.permutation(routed)), *routed_row = x.idx(x.permutation(routed));
  if (op.kind == OpKind::moe_permute)
    return bench_of(x, MoePermute{backward, in, order, routed_row, out, kk, tokens, width});
  float *weight = x.f(x.f32(routed)), *d_weight = x.f(x.raw(routed * 4));
  B* d_out = x.b(x.bf16(tokens * width));
  return bench_of(x, MoeUnpermute{backward, in, order, routed_row, weight, out, d_out, out, d_weight, kk, tokens,
                                  width});
}

std::optional<KernelBench> optimizer_bench(Builder& x, const Op& op, std::string& why_not) {
  const std::int64_t count = op.elements;
  if (count <= 0) {
    why_not = "no elements";
    return std::nullopt;
  }
  const OptimizerPrecision& precision = op.optimizer_precision;
  if (!executor_stores(precision.main_params) || !executor_stores(precision.exp_avg) ||
      !executor_stores(precision.exp_avg_sq)) {
    why_not = "the executor keeps optimizer state in fp32 or bf16 only";
    return std::nullopt;
  }
  // Random state of each array's dtype: the timing does not depend on the values.
  const auto state = [&](StateDtype d) { return x.v(d == StateDtype::bf16 ? x.bf16(count) : x.f32(count)); };
  const auto type = [](StateDtype d) { return d == StateDtype::bf16 ? k::StateType::bf16 : k::StateType::f32; };
  const bool fp32_master = precision.main_params == StateDtype::fp32 && !precision.store_param_remainders;
  k::AdamWState adam{fp32_master ? x.f(x.f32(count)) : nullptr, state(precision.exp_avg), type(precision.exp_avg),
                     state(precision.exp_avg_sq), type(precision.exp_avg_sq)};
  if (precision.store_param_remainders) adam.remainders = static_cast<std::int16_t*>(x.v(x.bf16(count)));
  // The main gradient in the op's type (framework.main_grad_dtype), as twin execute's step reads it.
  const k::GradRef grad = op.main_gradient_bytes == 4 ? k::GradRef(x.f(x.f32(count))) : k::GradRef(x.b(x.bf16(count)));
  B* param = x.b(x.bf16(count));
  float *partials = x.f(x.raw(k::grad_norm_partial_count() * 4)), *sum_sq = x.f(x.f32(1)), *scale = x.f(x.raw(4));
  // The gradient-norm pass and the clip factor, then the entry's update: on one GPU the optimizer op runs all
  // three (under data parallelism the pass runs in the grad_norm op before it, beside the norm's all-reduce).
  const OptimizerStep update{adam, grad, param, count, k::AdamWParams{}, scale};
  x.bench.run = [=](cudaStream_t s) {
    k::grad_sum_squares(grad, count, partials, sum_sq, s);
    k::grad_clip_scale(sum_sq, 1.f, scale, s);
    launch(update, s);
  };
  return std::move(x.bench);
}

// The optimizer's cast of a stage's weights (rows elements, one column) as matrices hidden wide: the executor casts
// each weight [in, out] of them (executor/gpu/fp8_linears.cpp).
std::optional<KernelBench> fp8_cast_bench(Builder& x, const Op& op, const KernelModelFacts& facts,
                                          std::string& why_not) {
  const std::int64_t rows = op.rows, cols = op.cols, n = rows * cols;
  const bool flat = cols == 1 && facts.hidden > 0 && rows % facts.hidden == 0;
  const std::int64_t r = flat ? rows / facts.hidden : rows, c = flat ? facts.hidden : cols;
  if (op.fp8_columnwise && (r % 4 || c % 4)) {
    why_not = "an FP8 cast needs positive rows and cols, multiples of 4 with a columnwise copy";
    return std::nullopt;
  }
  B* in = x.b(x.bf16(n));
  auto* rowwise = static_cast<std::uint8_t*>(x.v(x.raw(n)));
  auto* columnwise = op.fp8_columnwise ? static_cast<std::uint8_t*>(x.v(x.raw(n))) : nullptr;
  const k::Fp8Scaling blocks = fp8_cast_blocks(op.fp8_recipe, op.linear_tensor);
  float* scaling = x.f(x.raw(std::max<std::int64_t>(k::kFp8ScalingFloats, k::fp8_block_scale_floats(blocks, r, c)) * 4));
  Fp8Cast cast{in, r, c, k::Fp8Type::e4m3, rowwise, columnwise, scaling};
  if (columnwise != nullptr && blocks != k::Fp8Scaling::per_tensor)
    cast.columnwise_scaling = x.f(x.raw(k::fp8_block_scale_floats(blocks, c, r) * 4));
  float* state = nullptr;
  if (op.fp8_recipe == Fp8Recipe::delayed) {
    state = x.f(x.raw(k::fp8_delayed_state_floats(kFp8BenchHistory) * 4));
    k::fp8_delayed_state_reset(state, kFp8BenchHistory, x.stream);
  }
  const auto call = fp8_cast_bench_call(op, cast, state, why_not);
  if (!call) return std::nullopt;
  return bench_of(x, *call);
}

// Gathered rows [rows, cols] of one byte each, read once and written transposed.
std::optional<KernelBench> fp8_transpose_bench(Builder& x, const Op& op) {
  const std::int64_t n = op.rows * op.cols;
  auto* rowwise = static_cast<std::uint8_t*>(x.v(x.bf16((n + 1) / 2)));  // random bytes
  auto* columnwise = static_cast<std::uint8_t*>(x.v(x.raw(n)));
  return bench_of(x, Fp8Transpose{rowwise, op.rows, op.cols, columnwise});
}

// Whether the kind's bench reads the op's rows and columns.
bool reads_rows_and_cols(OpKind kind) {
  return kind != OpKind::elementwise && kind != OpKind::moe_permute && kind != OpKind::moe_unpermute &&
         kind != OpKind::optimizer_step && kind != OpKind::attention_forward && kind != OpKind::attention_backward;
}

}  // namespace

std::size_t KernelBench::bytes() const {
  std::size_t total = 0;
  for (const DeviceBuffer& b : buffers) total += b.bytes();
  return total;
}

std::optional<KernelBench> make_kernel_bench(const Op& op, const KernelModelFacts& facts, std::uint64_t seed,
                                             cudaStream_t stream, std::string& why_not) {
  if (op_kind_traits(op.kind).measured_by != CalibrationMethod::kernel_bench) {
    why_not = to_string(op.kind) + " is not timed by the kernel calibration";  // GEMM grid or NCCL sweeps
    return std::nullopt;
  }
  if (reads_rows_and_cols(op.kind) && (op.rows <= 0 || op.cols <= 0)) {
    why_not = "rows and cols must be positive";
    return std::nullopt;
  }
  Builder x{{}, seed, stream};
  switch (op.kind) {
    case OpKind::norm_forward: return norm_forward_bench(x, op);
    case OpKind::norm_backward: return norm_backward_bench(x, op, why_not);
    case OpKind::rope_forward:
    case OpKind::rope_backward: return rope_bench(x, op, why_not);
    case OpKind::activation_forward:
    case OpKind::activation_backward: return activation_bench(x, op, facts);
    case OpKind::elementwise: return elementwise_bench(x, op, why_not);
    case OpKind::embedding_forward:
    case OpKind::embedding_backward: return embedding_bench(x, op);
    case OpKind::loss_forward:
    case OpKind::loss_backward: return loss_bench(x, op, facts, why_not);
    case OpKind::moe_permute:
    case OpKind::moe_unpermute: return moe_bench(x, op, facts, why_not);
    case OpKind::optimizer_step: return optimizer_bench(x, op, why_not);
    case OpKind::fp8_cast: return fp8_cast_bench(x, op, facts, why_not);
    case OpKind::fp8_transpose: return fp8_transpose_bench(x, op);
    case OpKind::attention_forward:
    case OpKind::attention_backward: return attention_bench(x, op, facts, why_not);
    case OpKind::gemm:
    case OpKind::moe_router:
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
    case OpKind::send:
    case OpKind::recv: break;  // refused above: measured otherwise (core/op_kinds.hpp)
  }
  why_not = to_string(op.kind) + " is not timed by the kernel calibration";
  return std::nullopt;
}

std::optional<Fp8Cast> fp8_cast_bench_call(const Op& op, Fp8Cast call, float* delayed_state, std::string& why_not) {
  call.recipe = op.fp8_recipe;
  switch (op.fp8_recipe) {
    case Fp8Recipe::tensorwise: return call;
    case Fp8Recipe::delayed:
      call.delayed_state = delayed_state;
      call.history_len = kFp8BenchHistory;
      return call;
    case Fp8Recipe::blockwise:
      call.blocks = fp8_cast_blocks(op.fp8_recipe, op.linear_tensor);
      return call;
    case Fp8Recipe::mxfp8: break;
  }
  why_not = "no FP8 cast kernel of recipe " + to_string(op.fp8_recipe);
  return std::nullopt;
}

}  // namespace twin::gpu
