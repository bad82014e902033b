// What each GPU activity of a PyTorch profiler trace is in twin's vocabulary, and what it was matched on: the
// kernels of one launching aten op form one op (GEMM shapes from aten::mm/addmm/bmm inputs, attention shapes from
// the SDPA op's query and key), NCCL kernels by their name and record_param_comms' sizes, and the rest by the
// aten op or annotation that launched them. Activities whose launching op the trace does not name are unmatched:
// counted with their time, never dropped. Also the step-level facts: GPU idle time inside a step (host gaps)
// and how much of the NCCL kernels' time ran beside compute kernels.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/op.hpp"
#include "traces/kineto_trace.hpp"

namespace twin {

enum class TraceClass : std::uint8_t {
  gemm,                // cuBLAS/cuBLASLt/CUTLASS kernels of aten::mm, addmm, bmm, baddbmm, _scaled_mm
  attention_forward,   // the kernels of an SDPA forward (cuDNN, flash, memory-efficient)
  attention_backward,
  collective,          // NCCL kernels
  optimizer,           // parameter-proportional work: fused AdamW, foreach ops (grad clipping), Optimizer.step
  fsdp,                // parameter-proportional copies under FSDP's annotations (all-gather copy-in/out, casts)
  memory_bound,        // any other kernel of a named aten op: norms, RoPE, activations, residuals, loss, casts
  memcpy,              // gpu_memcpy and gpu_memset activities
  unmatched,           // no launching op named in the trace
};
inline constexpr int kTraceClassCount = 9;
const char* to_string(TraceClass c);

// One launching op's GPU work, for the classes with shapes (gemm, attention).
struct ShapedTraceOp {
  Op op;                  // kind and shape as twin lowers them
  double busy_ns = 0;     // the sum of its activities' durations
  double beside_collective_ns = 0;  // of that, time while an NCCL kernel ran (slowed as the simulator slows it)
};

struct ClassTotals {
  std::int64_t activities = 0;
  double busy_ns = 0;
  // What its activities were matched on ("aten::mm input shapes, kernel nvjet_sm90_...") -> (activities, ns).
  std::map<std::string, std::pair<std::int64_t, double>> matched_on;
};

struct StepFacts {
  double span_ns = 0;             // first GPU activity's start to the last's end
  double busy_ns = 0;             // union of GPU activities
  double collective_ns = 0;       // NCCL kernels' durations
  double collective_overlapped_ns = 0;  // of that, time beside a non-NCCL kernel on another stream
};

struct ClassifiedTrace {
  std::string file;
  int rank = 0, world_size = 1;
  std::string device_name;
  std::vector<ShapedTraceOp> shaped;
  std::array<ClassTotals, kTraceClassCount> classes;
  std::vector<StepFacts> steps;   // one per ProfilerStep mark with GPU work
  double total_ns() const;        // every activity's duration
};

ClassifiedTrace classify_trace(const KinetoTrace& trace);

}  // namespace twin
