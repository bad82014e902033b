// Calibration of every compute op kind but the GEMMs: each op shape runs the executor's own kernels
// (gpu/kernels.hpp) under the CUPTI timer, and the profile's memory-bound and flash-attention
// efficiency models are refitted on the measurements.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/cluster.hpp"
#include "core/op.hpp"

namespace twin::gpu {

// What the ops alone do not say, taken from the scenario's model (defaults: a Llama-like model). A norm op says
// which norm it is (Op::normalization): the default grid's are RMSNorm, a scenario's its model's.
struct KernelModelFacts {
  std::int64_t hidden = 4096;   // width of the rows moe_permute / moe_unpermute move
  int top_k = 2;                // routed copies per token in moe_unpermute
  // The cap of the final logits that a loss op with softcapped_logits runs with (the op says whether, the model at
  // what; 0: none): a scenario's model's.
  double final_logit_softcap = 0;
  // The same for the attention scores of an attention op that says softcapped (Gemma-2's attn_logit_softcapping).
  double attention_softcap = 0;
  // The terms of a quick GeGLU activation op (the op says the function; gpt-oss's offset 1 and clamp 7 by default, a
  // scenario's its model's): its kernel's time does not depend on them, its arithmetic does.
  double glu_linear_offset = 1, activation_func_clamp_value = 7;
};

struct KernelOps {
  std::vector<Op> ops;          // distinct by kernel_shape_key, in key order
  KernelModelFacts facts;
};

// Memory-bound kinds over token counts and widths of 4096- and 8192-wide models, flash attention over
// sequence lengths 1024..16384, head dims 64 and 128, 16 and 32 heads, GQA and MHA; `quick` keeps fewer shapes.
KernelOps default_kernel_ops(bool quick);
// The distinct non-GEMM compute ops of every feasible candidate of the scenario at `path`.
KernelOps scenario_kernel_ops(const std::string& path);

struct KernelCalibration {
  std::vector<std::pair<std::string, Measurement>> measured;  // kernel_shape_key -> kernel time
  std::vector<std::string> skipped;                           // key: reason
  SaturatingEfficiency memory_bound;
  SaturatingEfficiency attention_forward;
  SaturatingEfficiency attention_backward;
  bool memory_bound_fitted = false, attention_forward_fitted = false, attention_backward_fitted = false;
  // The fitted points: work (bytes moved, or FLOPs) and median seconds, per model.
  std::vector<double> memory_bytes, memory_seconds, forward_flops, forward_seconds, backward_flops, backward_seconds;
  // Host wall time of the phase: making the buffer sets (allocations, random fills, plans), timing, freeing them.
  double set_up_s = 0, timing_s = 0, freeing_s = 0;
};

// Refits the three models on `calibration`'s points (a model with fewer than 2 points is left as is).
void fit_kernel_models(KernelCalibration& calibration, const GpuSpec& gpu);

// Times each op (warm-up, then `repetitions` CUPTI regions, inputs rotated over several buffer sets so
// that L2 does not hold them) and fits the models; models with fewer than 2 measured shapes keep
// `fallback`'s values and say so through the *_fitted flags.
KernelCalibration calibrate_kernels(const KernelOps& ops, const GpuSpec& gpu, const GpuKernelProfile& fallback,
                                    bool quick, const std::function<void(const std::string&)>& progress);

// What `twin calibrate` calls after the GEMMs: the default grid plus the scenario's ops (when `scenario`
// is not empty), measured into `kernels.measured` by kernel_shape_key, with memory_bound and
// attention_forward/backward replaced by their fits. Returns a summary for the profile's provenance.
nlohmann::json calibrate_kernels_into(GpuKernelProfile& kernels, const std::string& scenario, const GpuSpec& gpu,
                                      bool quick, const std::function<void(const std::string&)>& progress);

}  // namespace twin::gpu
