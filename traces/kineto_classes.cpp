// The launching op decides (the innermost aten op, found by External id): a kernel name alone would not give a
// GEMM's shape, and the same elementwise kernel serves a norm, a cast and an optimizer. Kernel names decide only
// what no aten op says: NCCL, and the kernel family recorded as what a GEMM was matched on.
#include "traces/kineto_classes.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

namespace twin {
namespace {

bool is_gemm_op(std::string_view n) {
  return n == "aten::mm" || n == "aten::addmm" || n == "aten::bmm" || n == "aten::baddbmm" || n == "aten::_scaled_mm";
}
bool is_attention_op(std::string_view n) {
  return n.find("scaled_dot_product") != n.npos || n.find("flash_attention") != n.npos ||
         n.find("efficient_attention") != n.npos || n.find("cudnn_attention") != n.npos;
}

// Kernel names of GEMM and attention libraries, for ops that record no shape (Transformer Engine's GEMMs run
// inside its autograd functions, _Linear, not an aten::mm): cuBLASLt's nvjet and sm90_xmma, CUTLASS, cuBLAS.
bool is_gemm_kernel(std::string_view k) {
  return k.starts_with("nvjet") || k.find("gemm") != k.npos || k.find("cutlass") != k.npos || k.starts_with("sm90_xmma");
}
bool is_attention_kernel(std::string_view k) {
  return k.find("flash") != k.npos || k.find("fmha") != k.npos || k.find("sdpa") != k.npos;
}
bool is_backward_kernel(std::string_view k) {
  return k.find("bwd") != k.npos || k.find("bprop") != k.npos || k.find("backward") != k.npos;
}

// "nvjet_sm90_tst_256x128_..." -> "nvjet_sm90_tst_256x128_..." cut at 40 characters; "void at::native::foo<...>(...)"
// -> "at::native::foo": the kernel's family, for what a class was matched on.
std::string kernel_family(std::string_view name) {
  if (name.starts_with("void ")) name.remove_prefix(5);
  name = name.substr(0, std::min(name.find_first_of("<("), std::size_t{40}));
  return std::string(name);
}

// A GEMM's (m, n, k, count) from its aten op's input shapes: mm [m,k] x [k,n]; addmm (bias, [m,k], [k,n]);
// bmm [b,m,k] x [b,k,n]; baddbmm (input, [b,m,k], [b,k,n]). False when the trace did not record them.
bool gemm_shape(std::string_view n, const std::vector<std::vector<std::int64_t>>& dims, GemmShape& g) {
  const std::size_t a = n == "aten::addmm" || n == "aten::baddbmm" ? 1 : 0;
  if (dims.size() < a + 2) return false;
  const std::vector<std::int64_t>& A = dims[a];
  const std::vector<std::int64_t>& B = dims[a + 1];
  const bool batched = n == "aten::bmm" || n == "aten::baddbmm";
  const std::size_t rank = batched ? 3 : 2;
  if (A.size() != rank || B.size() != rank || A[rank - 1] != B[rank - 2]) return false;
  g.count = batched ? static_cast<std::int32_t>(std::clamp<std::int64_t>(A[0], 1, 1 << 20)) : 1;
  g.m = A[rank - 2];
  g.k = A[rank - 1];
  g.n = B[rank - 1];
  return g.m > 0 && g.n > 0 && g.k > 0;
}

// SDPA's query and key: [batch, heads, seq, head_dim] for the scaled_dot_product and cuDNN ops, [batch, seq,
// heads, head_dim] for the flash and memory-efficient ops beneath them; a backward's first input is the output
// gradient.
bool attention_shape(std::string_view n, bool backward, const std::vector<std::vector<std::int64_t>>& dims,
                     AttentionShape& a) {
  const std::size_t q = backward ? 1 : 0;
  if (dims.size() < q + 2 || dims[q].size() != 4 || dims[q + 1].size() != 4) return false;
  const bool seq_major = n.find("_flash_attention_") != n.npos || n.find("_efficient_attention_") != n.npos;
  const auto& Q = dims[q];
  const auto& K = dims[q + 1];
  a.batch = Q[0];
  a.heads = seq_major ? Q[2] : Q[1];
  a.seq_q = seq_major ? Q[1] : Q[2];
  a.kv_heads = seq_major ? K[2] : K[1];
  a.seq_kv = seq_major ? K[1] : K[2];
  a.head_dim = Q[3];
  a.causal = true;  // what every causal LM runs; the trace's concrete inputs are not read
  a.flash = true;
  a.cudnn = n.find("cudnn") != n.npos;
  return a.batch > 0 && a.heads > 0 && a.kv_heads > 0 && a.seq_q > 0 && a.seq_kv > 0 && a.head_dim > 0;
}

// The nearest enclosing annotation whose name starts with `prefix` (FSDP::, Optimizer.), or -1.
bool under_annotation(const KinetoTrace& trace, std::int32_t op, std::string_view prefix) {
  for (std::int32_t at = op; at >= 0; at = trace.ops[static_cast<std::size_t>(at)].parent) {
    const KinetoCpuOp& o = trace.ops[static_cast<std::size_t>(at)];
    if (o.annotation && std::string_view(trace.names[static_cast<std::size_t>(o.name)]).starts_with(prefix)) return true;
  }
  return false;
}

struct Match {
  TraceClass cls = TraceClass::unmatched;
  std::string on;
};

Match classify(const KinetoTrace& trace, const KinetoGpuEvent& event, std::int32_t op_index) {
  const std::string_view kernel = trace.names[static_cast<std::size_t>(event.name)];
  switch (event.kind) {
    case KinetoGpuKind::memcpy: return {TraceClass::memcpy, "gpu_memcpy " + std::string(kernel)};
    case KinetoGpuKind::memset: return {TraceClass::memcpy, "gpu_memset"};
    case KinetoGpuKind::kernel: break;
  }
  if (kernel.starts_with("nccl")) return {TraceClass::collective, "NCCL kernel " + kernel_family(kernel)};
  if (op_index < 0) return {TraceClass::unmatched, "no launching op in the trace: " + kernel_family(kernel)};
  const KinetoCpuOp& op = trace.ops[static_cast<std::size_t>(op_index)];
  const std::string name = trace.names[static_cast<std::size_t>(op.name)];
  if (is_attention_op(name))
    return {name.find("backward") != name.npos ? TraceClass::attention_backward : TraceClass::attention_forward,
            name + " q/k shapes; kernel " + kernel_family(kernel)};
  if (is_gemm_op(name)) return {TraceClass::gemm, name + " input shapes; kernel " + kernel_family(kernel)};
  if (is_attention_kernel(kernel))
    return {is_backward_kernel(kernel) ? TraceClass::attention_backward : TraceClass::attention_forward,
            "kernel name " + kernel_family(kernel) + " (" + name + " records no attention shape)"};
  if (is_gemm_kernel(kernel))
    return {TraceClass::gemm, "kernel name " + kernel_family(kernel) + " (" + name + " records no GEMM shape)"};
  if (name.starts_with("aten::_fused_adam") || name.starts_with("aten::_foreach_") ||
      under_annotation(trace, op_index, "Optimizer."))
    return {TraceClass::optimizer, name + " (parameter-proportional)"};
  if (under_annotation(trace, op_index, "FSDP::")) return {TraceClass::fsdp, name + " under FSDP::"};
  return {TraceClass::memory_bound, name};
}

// The step (ProfilerStep mark) containing `ts_ns`, or -1.
int step_of(const KinetoTrace& trace, std::int64_t ts_ns) {
  const auto after = std::upper_bound(trace.steps.begin(), trace.steps.end(), ts_ns,
                                      [](std::int64_t t, const KinetoStep& s) { return t < s.ts_ns; });
  if (after == trace.steps.begin()) return -1;
  const KinetoStep& s = *std::prev(after);
  return ts_ns < s.ts_ns + s.dur_ns ? static_cast<int>(std::prev(after) - trace.steps.begin()) : -1;
}

// Length of [start, end) covered by `merged` (sorted, disjoint intervals).
double covered_ns(const std::vector<std::pair<std::int64_t, std::int64_t>>& merged, std::int64_t start, std::int64_t end) {
  double covered = 0;
  auto at = std::upper_bound(merged.begin(), merged.end(), std::pair{start, start},
                             [](const auto& a, const auto& b) { return a.second < b.second; });
  for (; at != merged.end() && at->first < end; ++at)
    covered += static_cast<double>(std::min(end, at->second) - std::max(start, at->first));
  return covered;
}

std::vector<std::pair<std::int64_t, std::int64_t>> merge(std::vector<std::pair<std::int64_t, std::int64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> merged;
  for (const auto& s : spans)
    if (!merged.empty() && s.first <= merged.back().second) merged.back().second = std::max(merged.back().second, s.second);
    else merged.push_back(s);
  return merged;
}

void step_facts(const KinetoTrace& trace, const std::vector<int>& step_of_event, ClassifiedTrace& out) {
  const std::size_t steps = trace.steps.size();
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> all(steps), compute(steps);
  for (std::size_t i = 0; i < trace.gpu.size(); ++i) {
    const int s = step_of_event[i];
    if (s < 0) continue;
    const KinetoGpuEvent& e = trace.gpu[i];
    all[static_cast<std::size_t>(s)].emplace_back(e.ts_ns, e.ts_ns + e.dur_ns);
    if (!std::string_view(trace.names[static_cast<std::size_t>(e.name)]).starts_with("nccl"))
      compute[static_cast<std::size_t>(s)].emplace_back(e.ts_ns, e.ts_ns + e.dur_ns);
  }
  for (std::size_t s = 0; s < steps; ++s) {
    if (all[s].empty()) continue;
    const auto busy = merge(all[s]);
    const auto computing = merge(compute[s]);
    StepFacts facts;
    facts.span_ns = static_cast<double>(busy.back().second - busy.front().first);
    for (const auto& b : busy) facts.busy_ns += static_cast<double>(b.second - b.first);
    for (std::size_t i = 0; i < trace.gpu.size(); ++i) {
      const KinetoGpuEvent& e = trace.gpu[i];
      if (step_of_event[i] != static_cast<int>(s) || !std::string_view(trace.names[static_cast<std::size_t>(e.name)]).starts_with("nccl"))
        continue;
      facts.collective_ns += static_cast<double>(e.dur_ns);
      facts.collective_overlapped_ns += covered_ns(computing, e.ts_ns, e.ts_ns + e.dur_ns);
    }
    out.steps.push_back(facts);
  }
}

}  // namespace

const char* to_string(TraceClass c) {
  switch (c) {
    case TraceClass::gemm: return "gemm";
    case TraceClass::attention_forward: return "attention_forward";
    case TraceClass::attention_backward: return "attention_backward";
    case TraceClass::collective: return "collective";
    case TraceClass::optimizer: return "optimizer";
    case TraceClass::fsdp: return "fsdp";
    case TraceClass::memory_bound: return "memory_bound";
    case TraceClass::memcpy: return "memcpy";
    case TraceClass::unmatched: return "unmatched";
  }
  return "unknown";
}

double ClassifiedTrace::total_ns() const {
  double total = 0;
  for (const ClassTotals& c : classes) total += c.busy_ns;
  return total;
}

ClassifiedTrace classify_trace(const KinetoTrace& trace) {
  ClassifiedTrace out{trace.file, trace.rank, trace.world_size, trace.device_name, {}, {}, {}};
  std::vector<int> step_of_event(trace.gpu.size(), -1);
  std::map<std::int32_t, std::size_t> shaped_of_op;  // launching op -> its entry in out.shaped
  std::vector<std::pair<std::int64_t, std::int64_t>> nccl;
  for (const KinetoGpuEvent& e : trace.gpu)
    if (std::string_view(trace.names[static_cast<std::size_t>(e.name)]).starts_with("nccl"))
      nccl.emplace_back(e.ts_ns, e.ts_ns + e.dur_ns);
  nccl = merge(std::move(nccl));
  for (std::size_t i = 0; i < trace.gpu.size(); ++i) {
    const KinetoGpuEvent& event = trace.gpu[i];
    const std::int32_t op_index = trace.launching_op(event);
    step_of_event[i] = step_of(trace, op_index >= 0 ? trace.ops[static_cast<std::size_t>(op_index)].ts_ns : event.ts_ns);
    const Match match = classify(trace, event, op_index);
    ClassTotals& totals = out.classes[static_cast<std::size_t>(match.cls)];
    ++totals.activities;
    totals.busy_ns += static_cast<double>(event.dur_ns);
    auto& [count, ns] = totals.matched_on[match.on];
    ++count;
    ns += static_cast<double>(event.dur_ns);
    const bool shaped_class = (match.cls == TraceClass::gemm || match.cls == TraceClass::attention_forward ||
                               match.cls == TraceClass::attention_backward) && !match.on.starts_with("kernel name");
    if (!shaped_class || step_of_event[i] < 0) continue;  // outside the profiled steps: counted, not folded
    const auto [at, added] = shaped_of_op.try_emplace(op_index, out.shaped.size());
    if (added) {
      const KinetoCpuOp& op = trace.ops[static_cast<std::size_t>(op_index)];
      const std::string_view name = trace.names[static_cast<std::size_t>(op.name)];
      Op shaped;
      bool known = false;
      if (match.cls == TraceClass::gemm) {
        shaped.kind = OpKind::gemm;
        known = gemm_shape(name, op.dims, shaped.gemm);
      } else {
        shaped.kind = match.cls == TraceClass::attention_forward ? OpKind::attention_forward : OpKind::attention_backward;
        known = attention_shape(name, shaped.kind == OpKind::attention_backward, op.dims, shaped.attention);
      }
      if (!known) {
        shaped_of_op.erase(at);  // no shape recorded: counted in its class, not folded
        continue;
      }
      out.shaped.push_back({shaped, 0, 0});
    }
    out.shaped[at->second].busy_ns += static_cast<double>(event.dur_ns);
    out.shaped[at->second].beside_collective_ns += covered_ns(nccl, event.ts_ns, event.ts_ns + event.dur_ns);
  }
  step_facts(trace, step_of_event, out);
  return out;
}

}  // namespace twin
