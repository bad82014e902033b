// Grids and scenario shapes are deduplicated by kernel_shape_key in an ordered map, so the order of
// measurement (and the profile's bytes) depends only on the inputs.
#include "calibrate/gpu/kernel_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "calibrate/gpu/clock_probe.hpp"
#include "calibrate/gpu/kernel_benches.hpp"
#include "calibrate/kernel_fit.hpp"
#include "calibrate/model_fit.hpp"
#include "core/attention_flops.hpp"
#include "core/scenario.hpp"
#include "cost/sm_clock.hpp"
#include "strategies/fp8_linears.hpp"
#include "strategies/search.hpp"

namespace twin::gpu {
namespace {

bool is_timed_kind(OpKind kind) {
  Op op;
  op.kind = kind;
  return !op.is_communication() && kind != OpKind::gemm && kind != OpKind::moe_router;
}

Op rows_cols(OpKind kind, std::int64_t rows, std::int64_t cols, bool gated = true) {
  Op op;
  op.kind = kind;
  op.rows = rows;
  op.cols = cols;
  op.activation = gated ? Activation::swiglu : Activation::gelu;  // the default grid's: a Llama's and a GPT's
  return op;
}

Op attention(OpKind kind, std::int64_t seq, std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim,
             std::int64_t batch = 1) {
  Op op;
  op.kind = kind;
  op.attention = AttentionShape{batch, heads, kv_heads, seq, seq, head_dim, true, true};
  return op;
}

void add(std::map<std::string, Op>& ops, const Op& op) { ops.emplace(kernel_shape_key(op), op); }

KernelOps to_ops(const std::map<std::string, Op>& by_key, const KernelModelFacts& facts) {
  KernelOps out;
  out.facts = facts;
  for (const auto& [key, op] : by_key) out.ops.push_back(op);
  return out;
}

// One op's kernel time: warm-up, then `repetitions` CUPTI regions over the rotating buffer sets. An op that follows
// the SM clock (attention, a soft-capped loss) is bracketed by two clock probes and, where the profile's timings of
// such ops are at its reference clock (GpuKernelProfile::attention_at_reference_clock), scaled to that clock by its
// clock law (cost/sm_clock.hpp, sm_clock_exponent).
Measurement time_op(const Op& op, const std::string& key, std::vector<KernelBench>& sets, cudaStream_t stream,
                    int warmup, int repetitions, const GpuKernelProfile& profile, CuptiKernelTimer& timer,
                    std::uint64_t& next_region) {
  for (int w = 0; w < warmup; ++w) sets[w % sets.size()].run(stream);
  timer.collect();  // drop fills and warm-up
  const double exponent = sm_clock_exponent(op);  // of the ops timed here, attention's and a capped loss's are not 0
  const bool probed = exponent > 0;
  const auto probe = [&] {
    const std::uint64_t region = next_region++;
    timer.begin_region(region);
    launch_clock_probe(stream);
    timer.end_region();
    return region;
  };
  const std::uint64_t probe_before = probed ? probe() : 0;
  const std::uint64_t first_region = next_region;
  for (int r = 0; r < repetitions; ++r) {
    timer.begin_region(next_region++);
    sets[r % sets.size()].run(stream);
    timer.end_region();
  }
  const std::uint64_t end_region = next_region;
  const std::uint64_t probe_after = probed ? probe() : 0;
  const auto spans = region_spans_ns(timer.collect());
  std::vector<double> samples;
  for (const auto& [region, span_ns] : spans)
    if (region >= first_region && region < end_region) samples.push_back(span_ns);
  if (samples.size() != static_cast<std::size_t>(repetitions))
    throw std::runtime_error(fmt::format("CUPTI returned kernel records for {} of {} repetitions of {}",
                                         samples.size(), repetitions, key));
  Measurement m = summarize(samples);
  if (!probed) return m;
  if (!spans.count(probe_before) || !spans.count(probe_after))
    throw std::runtime_error("CUPTI returned no kernel record for a clock probe beside " + key);
  m.sm_clock_MHz = (clock_probe_MHz(spans.at(probe_before)) + clock_probe_MHz(spans.at(probe_after))) / 2;
  if (!profile.attention_at_reference_clock || profile.reference_sm_clock_MHz <= 0) return m;
  return at_sm_clock(m, profile.reference_sm_clock_MHz, exponent);
}

}  // namespace

namespace {

// Stores the measurements (a scenario shape measured twice keeps its later, scenario-side value) and
// refits the models over every measured point, grid and scenario together.
nlohmann::json apply(GpuKernelProfile& kernels, const KernelCalibration& calibration, const GpuSpec& gpu) {
  for (const auto& [key, m] : calibration.measured) kernels.measured[key] = m;
  nlohmann::json fitted = nlohmann::json::array();
  kernels.memory_bound = calibration.memory_bound;
  kernels.attention_forward = calibration.attention_forward;
  kernels.attention_backward = calibration.attention_backward;
  if (calibration.memory_bound_fitted) fitted.push_back("memory_bound");
  if (calibration.attention_forward_fitted) fitted.push_back("attention_forward");
  if (calibration.attention_backward_fitted) fitted.push_back("attention_backward");
  return {{"kernel_timing", "CUPTI kernel spans of gpu/kernels (all kernels of an op in one span), random "
                            "data, rotating buffer sets, median/p10/p90"},
          {"attention_clock", kernels.attention_at_reference_clock
                                  ? "probed beside each timing, scaled to reference_sm_clock_MHz"
                                  : "probed beside each timing (sm_clock_MHz), kept as timed"},
          {"kernel_shapes_measured", calibration.measured.size()},
          {"kernel_shapes_skipped", calibration.skipped},
          {"kernel_models_fitted", fitted},
          {"gpu_preset_peaks", {{"hbm_bandwidth_GBps", gpu.hbm_bandwidth_GBps}, {"peak_bf16_tflops", gpu.peak_bf16_tflops}}}};
}

// Attention over its axes (cost/shape_space.cpp: batch x heads, sequence, head dim): head dims 64 and 128, each at two
// head counts, GQA and MHA, sequences 1024 to 16384 (since 2026-11-29: before, two configurations to 8192, and shapes
// off them were priced up to 26% off; docs/ACCURACY.md). Since 2026-11-30 also head dims 96 (Phi-3's) and 256
// (Gemma's), whose backward runs well below the rate of 128's (docs/ACCURACY.md "Head dims off the grid"), and every
// head dim at two and four sequences a batch (32 to 128 pairs) and head dim 256 at 8 pairs: a flash kernel's time per
// (batch x head) pair falls as the pairs fill the GPU (by 11% from 32 to 128 pairs of head dim 96 on an H200), and with
// one head count per head dim a micro-batch of 2 or 4 took its rate from other head dims' shapes, off by up to 10%
// (docs/ACCURACY.md "Attention over batch and heads").
void add_attention_grid(std::map<std::string, Op>& ops, bool quick) {
  struct Heads {
    std::int64_t heads, kv_heads, head_dim;
  };
  static const Heads kHeads[] = {{32, 8, 128}, {16, 16, 64}, {16, 16, 128}, {32, 32, 64}, {16, 8, 256}, {32, 32, 96}};
  const std::vector<std::int64_t> seqs = quick ? std::vector<std::int64_t>{1024, 4096} : std::vector<std::int64_t>{1024, 2048, 4096, 8192};
  for (std::int64_t seq : seqs)
    for (OpKind kind : {OpKind::attention_forward, OpKind::attention_backward}) {
      if (quick) {
        add(ops, attention(kind, seq, 32, 8, 128));
        continue;
      }
      for (const Heads& h : kHeads) add(ops, attention(kind, seq, h.heads, h.kv_heads, h.head_dim));
    }
  if (quick) return;
  for (OpKind kind : {OpKind::attention_forward, OpKind::attention_backward}) {
    add(ops, attention(kind, 16384, 16, 16, 64));
    add(ops, attention(kind, 16384, 16, 16, 128));
    add(ops, attention(kind, 16384, 32, 32, 64));
    for (std::int64_t seq : {2048, 4096, 8192}) {
      for (const Heads& h : kHeads)
        for (std::int64_t batch : {2, 4}) add(ops, attention(kind, seq, h.heads, h.kv_heads, h.head_dim, batch));
      add(ops, attention(kind, seq, 8, 4, 256));
    }
  }
}

}  // namespace

KernelOps default_kernel_ops(bool quick) {
  std::map<std::string, Op> ops;
  const std::vector<std::int64_t> tokens = quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{1024, 4096, 16384};
  const std::vector<std::int64_t> widths = quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{4096, 8192};
  for (std::int64_t t : tokens) {
    for (std::int64_t h : widths) {
      for (OpKind kind : {OpKind::norm_forward, OpKind::norm_backward, OpKind::embedding_forward, OpKind::embedding_backward})
        add(ops, rows_cols(kind, t, h));
      for (OpKind kind : {OpKind::norm_forward, OpKind::norm_backward}) {  // GPT-style models' LayerNorm (since 2026-11-30)
        Op layernorm = rows_cols(kind, t, h);
        layernorm.normalization = Normalization::layernorm;
        add(ops, layernorm);
      }
      Op fused_norm = rows_cols(OpKind::norm_backward, t, h);  // framework.residual_fusion's norm backward
      fused_norm.fuses_residual = true;
      add(ops, fused_norm);
      Op residual;
      residual.kind = OpKind::elementwise;
      residual.bytes = 3 * t * h * 2;
      add(ops, residual);
      for (Fp8Recipe recipe : {Fp8Recipe::tensorwise, Fp8Recipe::delayed}) {  // an FP8 linear's input: both copies
        Op cast = rows_cols(OpKind::fp8_cast, t, h);
        cast.fp8_columnwise = true;
        cast.fp8_recipe = recipe;
        cast.bytes = fp8_cast_bytes(recipe, t * h, true);
        add(ops, cast);
      }
      Op transpose = rows_cols(OpKind::fp8_transpose, t, h);  // SP's gathered rows, per-tensor scales
      transpose.bytes = fp8_transpose_bytes(t * h);
      add(ops, transpose);
      add(ops, rows_cols(OpKind::rope_forward, t, h + h / 4));  // GQA with 8 KV heads of 32: q + k widths
      add(ops, rows_cols(OpKind::rope_backward, t, h + h / 4));
    }
    for (std::int64_t ffn : {11008, 14336}) {
      add(ops, rows_cols(OpKind::activation_forward, t, ffn));
      add(ops, rows_cols(OpKind::activation_backward, t, ffn));
    }
    add(ops, rows_cols(OpKind::activation_forward, t, 16384, false));
    add(ops, rows_cols(OpKind::activation_backward, t, 16384, false));
    // Vocabularies to 262,144 (Gemma's 256,000 and 262,144; Llama 3's 128,256 and Qwen's 152,064 lie between).
    for (std::int64_t vocab : {32000, 64128, 262144}) {
      add(ops, rows_cols(OpKind::loss_forward, t, vocab));
      add(ops, rows_cols(OpKind::loss_backward, t, vocab));
    }
    // Soft-capped logits (Gemma-2's): a tanh per logit in each pass makes the loss compute-bound, 2-3x the plain
    // one's time (docs/ACCURACY.md, "Gemma-2- and Nemotron-4-shaped runs"); keyed apart, so measured apart, at
    // Gemma-2's vocabulary too (extrapolated from 64,128 columns its loss ran 1.22-1.27x its price, 2026-12-01).
    for (OpKind kind : {OpKind::loss_forward, OpKind::loss_backward})
      for (std::int64_t vocab : {64128, 262144}) {
        Op capped = rows_cols(kind, t, vocab);
        capped.softcapped_logits = true;
        add(ops, capped);
      }
    for (OpKind kind : {OpKind::moe_permute, OpKind::moe_unpermute}) {
      Op moved;
      moved.kind = kind;
      moved.bytes = 2 * t * 2 * 4096 * 2;  // lowering's rule: tokens x top_k 2 x hidden 4096, read + write
      add(ops, moved);
    }
  }
  // AdamW on a 16-bit main gradient and on an fp32 one (framework.main_grad_dtype float32: Megatron's default for bf16
  // training), each its own kernel.
  for (std::int64_t elements : quick ? std::vector<std::int64_t>{1 << 24, 1 << 27} : std::vector<std::int64_t>{1 << 20, 1 << 24, 1 << 27, 1 << 29})
    for (const int main_gradient_bytes : {2, 4}) {
      Op step;
      step.kind = OpKind::optimizer_step;
      step.elements = elements;
      step.main_gradient_bytes = static_cast<std::int8_t>(main_gradient_bytes);
      add(ops, step);
    }
  // Narrower optimizer state (training.optimizer_precision): bf16 moments, and bf16 parameters without a master
  // copy; other recipes are priced from these and the fp32 ones by bytes per parameter.
  for (const OptimizerPrecision precision : {OptimizerPrecision{StateDtype::fp32, StateDtype::bf16, StateDtype::bf16},
                                             OptimizerPrecision{StateDtype::bf16, StateDtype::bf16, StateDtype::bf16}}) {
    Op step;
    step.kind = OpKind::optimizer_step;
    step.elements = std::int64_t{1} << 27;
    step.optimizer_precision = precision;
    add(ops, step);
  }
  add_attention_grid(ops, quick);
  KernelModelFacts facts;
  facts.final_logit_softcap = 30;  // Gemma-2's cap; the time of a tanh does not depend on it
  facts.attention_softcap = 50;    // Gemma-2's attention cap, likewise
  return to_ops(ops, facts);
}

KernelOps scenario_kernel_ops(const std::string& path) {
  const Scenario scenario = load_scenario(path);
  std::map<std::string, Op> ops;
  for_each_candidate_op(scenario, [&](const Op& op) {
    if (is_timed_kind(op.kind)) add(ops, op);
  });
  KernelModelFacts facts;
  facts.hidden = scenario.model.hidden_size;
  if (scenario.model.moe.top_k > 0) facts.top_k = scenario.model.moe.top_k;
  facts.final_logit_softcap = scenario.model.final_logit_softcap;
  facts.attention_softcap = scenario.model.attention_softcap;
  facts.glu_linear_offset = scenario.model.glu_linear_offset;
  facts.activation_func_clamp_value = scenario.model.activation_func_clamp_value;
  return to_ops(ops, facts);
}

KernelCalibration calibrate_kernels(const KernelOps& ops, const GpuSpec& gpu, const GpuKernelProfile& fallback,
                                    bool quick, const std::function<void(const std::string&)>& progress) {
  KernelCalibration result;
  result.memory_bound = fallback.memory_bound;
  result.attention_forward = fallback.attention_forward;
  result.attention_backward = fallback.attention_backward;
  const int warmup = quick ? 2 : 3, repetitions = quick ? 7 : 15;
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int device = 0, l2_bytes = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  std::vector<double>& mem_bytes = result.memory_bytes;
  std::vector<double>& mem_seconds = result.memory_seconds;
  std::vector<double>& fwd_flops = result.forward_flops;
  std::vector<double>& fwd_seconds = result.forward_seconds;
  std::vector<double>& bwd_flops = result.backward_flops;
  std::vector<double>& bwd_seconds = result.backward_seconds;
  {
    CuptiKernelTimer timer;
    const std::shared_ptr<void> attention_held = hold_shared_attention();  // one cuDNN handle for the phase
    std::uint64_t next_region = 1;
    using Clock = std::chrono::steady_clock;
    const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    for (std::size_t i = 0; i < ops.ops.size(); ++i) {
      const Op& op = ops.ops[i];
      const std::string key = kernel_shape_key(op);
      const Clock::time_point set_up_from = Clock::now();
      std::size_t free_bytes = 0, total_bytes = 0;
      TWIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
      // Rotate over buffer sets until they span twice the L2 (at most 4 sets, within half the free memory).
      std::vector<KernelBench> sets;
      std::string why_not;
      std::size_t held = 0;
      while (sets.size() < 4 && (sets.empty() || held < 2 * static_cast<std::size_t>(l2_bytes))) {
        if (!sets.empty() && held + sets.front().bytes() > free_bytes / 2) break;
        std::optional<KernelBench> bench;
        try {
          bench = make_kernel_bench(op, ops.facts, 1000 * i + sets.size() * 100 + 1, stream, why_not);
        } catch (const std::runtime_error& e) {  // out of memory for a huge shape: skip it, keep going
          cudaGetLastError();
          why_not = e.what();
        }
        if (!bench) break;
        held += bench->bytes();
        sets.push_back(std::move(*bench));
      }
      if (sets.empty()) {
        result.skipped.push_back(key + ": " + why_not);
        if (progress) progress(fmt::format("kernel {}/{} {}: skipped ({})", i + 1, ops.ops.size(), key, why_not));
        continue;
      }
      const Clock::time_point timing_from = Clock::now();
      result.set_up_s += std::chrono::duration<double>(timing_from - set_up_from).count();
      const Measurement m = time_op(op, key, sets, stream, warmup, repetitions, fallback, timer, next_region);
      result.timing_s += seconds_since(timing_from);
      result.measured.emplace_back(key, m);
      const double seconds = m.median_ns * 1e-9;
      std::string rate;
      if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) {
        const double flops = attention_flops(op.attention, op.kind == OpKind::attention_backward);
        (op.kind == OpKind::attention_forward ? fwd_flops : bwd_flops).push_back(flops);
        (op.kind == OpKind::attention_forward ? fwd_seconds : bwd_seconds).push_back(seconds);
        rate = fmt::format("{:.1f} TFLOP/s", flops / seconds * 1e-12);
        if (m.sm_clock_MHz > 0) rate += fmt::format(", ran at {:.0f} MHz", m.sm_clock_MHz);
      } else {
        const double bytes = memory_bound_bytes(op);
        mem_bytes.push_back(bytes);
        mem_seconds.push_back(seconds);
        rate = fmt::format("{:.0f} GB/s", bytes / seconds * 1e-9);
      }
      if (progress)
        progress(fmt::format("kernel {}/{} {}: {:.1f} us (p10 {:.1f}, p90 {:.1f}), {}", i + 1, ops.ops.size(), key,
                             m.median_ns * 1e-3, m.p10_ns * 1e-3, m.p90_ns * 1e-3, rate));
      const Clock::time_point freeing_from = Clock::now();
      sets.clear();
      TWIN_CUDA_CHECK(cudaDeviceSynchronize());  // cudaFree's work lands here, not in the next op's set-up
      result.freeing_s += seconds_since(freeing_from);
    }
    if (timer.dropped_records() > 0)
      throw std::runtime_error(fmt::format("CUPTI dropped {} activity records: kernel timings are incomplete",
                                           timer.dropped_records()));
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  fit_kernel_models(result, gpu);
  if (progress)
    progress(fmt::format("{} kernel shapes: {:.1f} s setting up their buffers, {:.1f} s timing, {:.1f} s freeing",
                         ops.ops.size(), result.set_up_s, result.timing_s, result.freeing_s));
  return result;
}

void fit_kernel_models(KernelCalibration& c, const GpuSpec& gpu) {
  if (c.memory_bytes.size() >= 2) {
    c.memory_bound = fit_saturating_efficiency(c.memory_bytes, c.memory_seconds, gpu.hbm_bandwidth_GBps * 1e9);
    c.memory_bound_fitted = true;
  }
  if (c.forward_flops.size() >= 2) {
    c.attention_forward = fit_saturating_efficiency(c.forward_flops, c.forward_seconds, gpu.peak_bf16_tflops * 1e12);
    c.attention_forward_fitted = true;
  }
  if (c.backward_flops.size() >= 2) {
    c.attention_backward = fit_saturating_efficiency(c.backward_flops, c.backward_seconds, gpu.peak_bf16_tflops * 1e12);
    c.attention_backward_fitted = true;
  }
}

nlohmann::json calibrate_kernels_into(GpuKernelProfile& kernels, const std::string& scenario, const GpuSpec& gpu,
                                      bool quick, const std::function<void(const std::string&)>& progress) {
  KernelOps ops = default_kernel_ops(quick);
  if (!scenario.empty()) {
    // The scenario's facts (normalization, widths) apply to its own shapes; the grid keeps the defaults.
    const KernelOps needed = scenario_kernel_ops(scenario);
    if (progress) progress(fmt::format("scenario {}: {} distinct non-GEMM kernel shapes", scenario, needed.ops.size()));
    const KernelCalibration grid = calibrate_kernels(ops, gpu, kernels, quick, progress);
    KernelCalibration own = calibrate_kernels(needed, gpu, kernels, quick, progress);
    own.measured.insert(own.measured.begin(), grid.measured.begin(), grid.measured.end());
    own.skipped.insert(own.skipped.begin(), grid.skipped.begin(), grid.skipped.end());
    auto append = [](std::vector<double>& to, const std::vector<double>& from) { to.insert(to.end(), from.begin(), from.end()); };
    append(own.memory_bytes, grid.memory_bytes);
    append(own.memory_seconds, grid.memory_seconds);
    append(own.forward_flops, grid.forward_flops);
    append(own.forward_seconds, grid.forward_seconds);
    append(own.backward_flops, grid.backward_flops);
    append(own.backward_seconds, grid.backward_seconds);
    fit_kernel_models(own, gpu);
    return apply(kernels, own, gpu);
  }
  return apply(kernels, calibrate_kernels(ops, gpu, kernels, quick, progress), gpu);
}

}  // namespace twin::gpu
