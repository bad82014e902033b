// A performance profile: how long each op of the vocabulary takes on a GPU kind, how fast collectives
// move over each kind of link, and how much overlap slows both. The built-in profile holds estimates
// from datasheets and published efficiency curves; `twin calibrate` replaces them with measurements.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster.hpp"
#include "core/op.hpp"
#include "cost/interference.hpp"
#include "cost/gemm_rows_clock.hpp"
#include "cost/power_model.hpp"
#include "cost/sustained_clock.hpp"
#include "core/units.hpp"
#include "core/workload.hpp"
#include "cost/rank_drift.hpp"

namespace twin {

// A measured time of one exact shape (median over repetitions, with its spread).
struct Measurement {
  double median_ns = 0;
  double p10_ns = 0;
  double p90_ns = 0;
  int samples = 0;
  // Where it was measured: empty for `twin calibrate`'s micro-benchmarks, "trace:<run folder>" for an op
  // time folded in from an executed run (calibrate/recalibration.hpp). Written only when non-empty.
  std::string source;
  // Trace entries only. `priced_ns`: what the profile priced the shape at when the trace was folded
  // (its micro-benchmark, else the interpolation among the benchmarks): measured / priced is the shape's
  // in-situ ratio, which shapes near it inherit (cost/in_situ.hpp). `benchmark_ns`: the
  // micro-benchmark median the entry replaced (0: none), which interpolation keeps using.
  double priced_ns = 0;
  double benchmark_ns = 0;
  // GEMM micro-benchmarks: the SM clock (MHz) the timing ran at; median and percentiles are scaled to the
  // profile's reference clock (GpuKernelProfile::reference_sm_clock_MHz). 0: not recorded.
  double sm_clock_MHz = 0;
  // Trace entries folded into a profile priced by its sustained-clock curve, from a run whose busy SM clock was
  // recorded: that clock (MHz; median and percentiles as measured, at it). The entry's ratio is then split into
  // the clock's part, (reference / run clock)^e, and the rest, which shapes near it carry to steps at their own
  // clocks (cost/in_situ.hpp). 0: the ratio holds the run's clock, and carries it (entries folded before 2026-12-01).
  double run_sm_clock_MHz = 0;
};
// The micro-benchmark time of an entry: its median, or for a trace entry the benchmark it replaced (0 if none).
inline double benchmark_time_ns(const Measurement& m) { return m.source.empty() ? m.median_ns : m.benchmark_ns; }

// A fitted correction of a collective kind (format: docs/PROFILES.md, "Corrections from traces"): the runs
// folded in measured `factor` times what the algorithm models price for collectives over placements the
// profile has no measured table of; such collectives are priced at model x factor. factor = sum of
// measured / sum of model over the runs' ops. (Version 1 profiles may also hold compute kinds: they are
// read and written back, and no longer used: compute ops learn from the shapes traces measured.)
struct CorrectionRun {
  std::string run;          // "trace:<run folder>"
  double measured_ns = 0;   // sum over the run's measured ops of the kind (medians over iterations)
  double model_ns = 0;      // sum of the model's prices of the same ops
  int ops = 0;
};
struct KindCorrection {
  double factor = 1.0;
  std::vector<CorrectionRun> runs;  // by run, ascending; one entry per run (re-folding a run replaces it)
};
inline constexpr int kCorrectionsVersion = 1;

// Efficiency that rises with work: eff(w) = peak * w / (w + half_work). `half_work` is the work
// (FLOPs or bytes) at which half the peak is reached: small kernels are latency- and occupancy-bound.
struct SaturatingEfficiency {
  double peak = 1.0;
  double half_work = 0;
  double at(double work) const { return work <= 0 ? peak : peak * work / (work + half_work); }
  bool operator==(const SaturatingEfficiency&) const = default;
};

// One measured GEMM as a shape, for predicting shapes that were not measured (cost/gemm_predictor.hpp).
struct MeasuredGemm {
  GemmShape shape;
  double time_ns = 0;  // median kernel time of the micro-benchmark (benchmark_time_ns)
};
// One measured non-GEMM kernel shape, likewise (cost/kernel_predictor.hpp).
struct MeasuredKernelShape {
  Op op;
  double time_ns = 0;
};
// One shape a traced training step measured: log(measured / priced) (cost/in_situ.hpp).
struct TraceShape {
  Op op;
  double log_ratio = 0;
  // The ratio is the run's without its clock (Measurement::run_sm_clock_MHz): a step applies its own clock's part.
  bool clock_free = false;
};

// How much slower (> 1) or faster a kernel runs inside a training step than its benchmark price says, by
// kind of kernel, where no traced shape is near (cost/in_situ.hpp): a GPU at its power limit for
// minutes keeps other clocks than a micro-benchmark, and the framework's kernels interleave. Measured on
// twin execute runs (H100, H200) or fitted on published runs (docs/PROFILES.md names which); 1 = none.
struct InSituPrior {
  double gemm = 1.0;          // gemm, moe_router
  double attention = 1.0;     // attention forward and backward
  double memory_bound = 1.0;  // every other compute kind
  bool operator==(const InSituPrior&) const = default;
};
// The prior's factor for `op`'s kind.
double in_situ_prior_of(const InSituPrior& prior, const Op& op);

struct GpuKernelProfile {
  std::string gpu;                        // GpuSpec::name this applies to
  SaturatingEfficiency gemm;              // fraction of peak_bf16_tflops, by FLOPs of the GEMM
  SaturatingEfficiency attention_forward; // fraction of peak, by FLOPs
  SaturatingEfficiency attention_backward;
  // cuDNN's fused attention (Megatron's "fused" backend), by FLOPs; files without it take the above.
  SaturatingEfficiency fused_attention_forward;
  SaturatingEfficiency fused_attention_backward;
  SaturatingEfficiency memory_bound;      // fraction of hbm_bandwidth_GBps, by bytes moved
  double launch_overhead_ns = 0;          // added to every kernel
  // The host's time to issue one call of a grouped GEMM (the experts' GEMMs, one cuBLASLt call each) right after it
  // waited for the device, as after the MoE dispatch's host read: measured by `twin calibrate` (0: not measured).
  // Calls whose kernels are shorter than this run at the host's pace (compute_time_ns below, cost/kernel_cost.cpp).
  double grouped_gemm_issue_ns = 0;
  // GEMM times are at this SM clock: the median clock of calibration's GEMM timings on a GPU held at its
  // power limit, where the clock swings by tens of percent and a GEMM's time with it
  // (calibrate/gpu/clock_probe.hpp). 0: GEMM times as measured (profiles calibrated before 2026-11-23 20:00 UTC).
  double reference_sm_clock_MHz = 0;
  // Whether the attention timings (measured shapes and the fitted attention curves), and the soft-capped losses',
  // are at reference_sm_clock_MHz too: calibration probes the clock beside each timing of a kernel that follows the
  // SM clock (cost/sm_clock.hpp) and scales it as it does the GEMMs' (calibrate/gpu/kernel_calibration.cpp,
  // attention since 2026-11-29, the soft-capped loss since 2026-12-01), and the simulator then prices them at the
  // training clock as it does GEMMs. Optional in files ("attention_at_reference_clock"); false: as timed, at
  // whatever clock the calibrating GPU held (earlier profiles: ~1,950 MHz on an H200 timing sparse kernels,
  // against ~1,500 in training).
  bool attention_at_reference_clock = false;
  // The SM clock this kind of GPU holds through training steps: at its power limit under a training mix it
  // runs slower than across calibration's GEMM timings (H100: about 1,500 against 1,711 MHz; docs/PROFILES.md,
  // "The clock of a training step"). GEMM times at reference_sm_clock_MHz are priced at this clock (time x
  // reference / sustained, cost/sm_clock.hpp); a time a trace measured in training is not. 0: priced at the
  // reference clock. Folded from a run, it takes precedence over `sustained_clock`.
  double sustained_sm_clock_MHz = 0;
  // The clock measured under loads of several GEMM duties (calibration, cost/sustained_clock.hpp): where
  // sustained_sm_clock_MHz is 0, the simulator prices a class's GEMMs at the clock this curve gives for its
  // step's duty (sim/step_clock.hpp). Optional in files ("sustained_clock"); empty: not measured.
  SustainedClockCurve sustained_clock;
  // The same curve measured under FP8 GEMMs (E4M3 operands, per-tensor scales) in place of BF16 ones: FP8
  // tensor-core work draws more power per second, so a GPU at its cap may run its FP8 GEMMs at another clock.
  // Where present (and sustained_clock too), the simulator prices FP8 GEMMs at this curve's clock for the step's
  // duty (sim/step_clock.hpp). Optional in files ("sustained_clock_fp8"); empty: FP8 GEMMs at sustained_clock's.
  SustainedClockCurve sustained_clock_fp8;
  // The GPU's power model, measured by calibration beside the curves (cost/power_model.hpp): where present, the
  // simulator prices a step without FP8 GEMMs at the clock where its power meets the cap, or at the maximum clock
  // below it, in place of the curve's (sim/step_clock.hpp). Optional in files ("power_model"); absent: as before.
  PowerModel power_model;
  // How the curve's clock moves with the rows of a step's GEMMs (cost/gemm_rows_clock.hpp): where the curve prices
  // a step, its clock times gemm_rows_clock_factor (sim/step_clock.hpp). Optional in files ("gemm_rows_clock");
  // absent: the curve's clock as it is.
  GemmRowsClock gemm_rows_clock;
  // Optional in files ("in_situ_prior"); the built-in profile sets it per GPU.
  InSituPrior in_situ_prior;
  // Optional in files ("rank_drift"): how ranks of this kind of GPU drift apart between collectives
  // (sim/rank_drift.hpp). Absent: every rank of a group arrives at its collectives together.
  RankDrift rank_drift;
  // Exact shapes measured by calibration: key from kernel_shape_key(op) -> time. Lookup wins over the model.
  std::map<std::string, Measurement> measured;
  // Derived from `measured` on the benchmark basis (benchmark_time_ns), never written: load_profile,
  // calibration and recalibration fill them with index_measured_shapes(). Shapes with no exact entry are
  // interpolated among these (GEMMs, then every other kind among its own measured shapes).
  std::vector<MeasuredGemm> measured_gemms;
  std::vector<MeasuredGemm> measured_fp8_gemms;  // FP8 operands (cost/kernel_cost.cpp prices FP8 GEMMs from them)
  std::vector<MeasuredKernelShape> measured_kernels;
  // Derived likewise: the trace entries with their in-situ ratios, in key order.
  std::vector<TraceShape> trace_shapes;
  // Fitted corrections of collective kinds by name (to_string(OpKind)), for collectives priced without a
  // measured table (sim/flat_graph.cpp). Empty in profiles never recalibrated.
  std::map<std::string, KindCorrection> corrections;
};
// Fills measured_gemms, measured_kernels and trace_shapes from measured.
void index_measured_shapes(GpuKernelProfile& kernels);

// Collective algorithm on one kind of link: time = steps * latency + traffic / (bandwidth * efficiency).
enum class LinkKind { intra_node, inter_node };
struct LinkProfile {
  double latency_us = 0;                  // per algorithm step
  SaturatingEfficiency bandwidth;         // fraction of the link's nominal bandwidth, by message bytes
};

// How concurrency slows work: compute runs `compute_slowdown` times slower while communication is
// active on the same GPU (SM and memory contention); communication runs `communication_slowdown` slower
// while compute is active. Where `points` measure a collective kind beside a compute class, they price that pair
// instead (cost/interference.hpp); the two scalars price the rest.
struct OverlapProfile {
  double compute_slowdown = 1.0;
  double communication_slowdown = 1.0;
  std::vector<InterferencePoint> points;
};

// Measured by `twin calibrate` (built-in profiles have none): one collective over one communicator
// placement, with nccl-tests' definitions (algbw = size / time, busbw = algbw * factor).
struct CollectivePoint {
  Bytes size_bytes = 0;       // nccl-tests' S of the collective (see sim/collectives.hpp)
  double time_us = 0;         // mean over iterations, averaged over ranks
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};
struct CollectiveTable {
  std::string gpu;                         // GpuSpec::name of the GPUs measured (the simulator matches on it)
  OpKind collective = OpKind::all_reduce;  // all_reduce, all_gather, reduce_scatter, all_to_all, send (send/recv)
  int group_size = 2;
  int ranks_per_node = 2;                  // span, as GroupSpan
  int nodes = 1;
  // all_to_all: each rank's data for each peer sent as this many equal blocks in one NCCL group (the executor's
  // expert dispatch sends one block per local expert, gpu/row_exchange.hpp); 1: one block per peer, nccl-tests'
  // alltoall. Every other collective: 1.
  int blocks_per_peer = 1;
  double nominal_bandwidth_GBps = 0;       // the link bandwidth `fit` is a fraction of
  LinkProfile fit;                         // fitted on `points` with ring steps and the busbw factor
  std::vector<CollectivePoint> points;     // ascending size
};

// An MoE router's measured skew, folded from `twin execute` runs by `twin calibrate --from-trace`: per
// (experts, top-k), each run's mean over its (micro-batch, MoE layer) samples of the busiest expert's load over
// the mean. The simulator takes it for a scenario's model.moe.routing_imbalance where the scenario sets none.
struct MoeRoutingRun {
  std::string source;                    // "trace:<run folder>"
  std::int64_t samples = 0;              // (micro-batch, layer) routings measured
  std::int64_t tokens_per_micro_batch = 0;
  double imbalance_mean = 1.0;
};
struct MoeRouting {
  int num_experts = 0, top_k = 0;
  std::vector<MoeRoutingRun> runs;
  double routing_imbalance() const;  // the runs' means weighted by their samples
};

struct Profile {
  int version = 1;
  std::string name;
  bool builtin = false;
  // Whose kernels and steps the profile's times are: `twin calibrate` times twin's own kernels ("twin", also
  // files without the key); the built-in profile's in-situ priors are fitted on published Megatron-LM and NeMo
  // runs ("megatron-core"); a folded PyTorch profiler trace names its framework (traces/kineto_fold.hpp).
  FrameworkName framework = FrameworkName::twin;
  // The step-level facts of the last framework trace folded in (GPU idle time in a step, NCCL beside compute):
  // recorded for the reader, not priced; null when none. docs/PROFILES.md, "Folding a framework's trace".
  nlohmann::json step_facts;
  nlohmann::json provenance;              // gpu, count, driver, versions, host, date, command
  std::vector<GpuKernelProfile> gpus;
  LinkProfile intra_node;        // NVLink / NVSwitch inside a node
  LinkProfile inter_node;
  LinkProfile intra_node_pcie;   // intra-node collectives of nodes whose link kind is pcie
  OverlapProfile overlap;
  std::vector<CollectiveTable> collectives;  // calibrated profiles only (cost/collective_tables.hpp)
  std::vector<MoeRouting> moe_routing;       // folded runs of MoE models, by (num_experts, top_k)

  // The routing measured for this expert count and top-k, or nullptr.
  const MoeRouting* routing_for(int num_experts, int top_k) const;

  // The kernel profile of a GPU kind, matched on the name (case and punctuation ignored); a profile that
  // does not describe the GPU is an InputError naming it and the GPUs the profile describes
  // (profile_for_scenario() adds scaled copies where the scenario asks for them).
  const GpuKernelProfile& kernels_for(const GpuSpec& gpu) const;
  const LinkProfile& link(LinkKind kind) const { return kind == LinkKind::intra_node ? intra_node : inter_node; }
  // As link(), but intra-node traffic over PCIe uses intra_node_pcie.
  const LinkProfile& link(LinkKind kind, IntraNodeKind intra_kind) const {
    if (kind == LinkKind::intra_node && intra_kind == IntraNodeKind::pcie) return intra_node_pcie;
    return link(kind);
  }
};

// "pytorch-fsdp2 kernels measured on H200-141GB": which workload the profile's times describe, for the report.
std::string profile_workload(const Profile& profile);

// The family a GPU name belongs to ("hopper", "blackwell", "ampere", "ampere-consumer", "ada"), empty when unknown.
std::string gpu_family(std::string_view gpu_name);

// `profile` checked against every GPU kind of `cluster`: a GPU it describes is priced as measured; one it does
// not is an InputError at `json_path_prefix`/cluster/nodes/i/gpu of `source` naming the GPU and the profile's GPUs, unless
// `scale` is set: then the GPU gets a copy of the kernel profile of its family (else the first), every measured
// time scaled by the datasheet ratio (bf16 peak for GEMMs and attention, HBM bandwidth for the rest), and
// `scaled` (when given) receives one line per such GPU for the report.
Profile profile_for_cluster(Profile profile, const Cluster& cluster, bool scale, const std::string& source,
                            const std::string& json_path_prefix = "", std::vector<std::string>* scaled = nullptr);

// The embedded default: estimates for every GPU preset (see docs/PROFILES.md for the sources).
const Profile& builtin_profile();
// "builtin" or a path; throws InputError for missing, corrupt or partial files.
Profile load_profile(const std::string& name_or_path);
// Atomic: writes PATH.tmp then renames.
void save_profile(const Profile& profile, const std::filesystem::path& path);
nlohmann::json to_json(const Profile& profile);
Profile profile_from_json(const nlohmann::json& document, const std::string& source);

// Time of one compute op (not communication) on `gpu`, kernel launch overhead included: a shape measured
// in a traced run takes that time; any other its price at the training clock (training_clock_time_ns) times
// the in-situ ratio of the traced shapes near it (cost/in_situ.hpp; 1 where none is near). Throws
// std::logic_error for communication ops. `step_clock`: the clocks the step holds where the profile states
// no sustained_sm_clock_MHz (sim/step_clock.hpp reads them off the sustained-clock curves); 0: none. With traced
// shapes the price is taken at the profile's own clock (the one their ratios were measured against) and the step's
// clock moves it as part of the prior: in full far from every traced shape, not at all at one.
TimeNs compute_time_ns(const Profile& profile, const GpuSpec& gpu, const Op& op, StepClock step_clock = {});
// The benchmark price of `op`: the micro-benchmark of its exact shape (for a trace entry, the benchmark it
// replaced), else the model interpolated among the measured shapes of its kind (cost/gemm_predictor.hpp,
// cost/kernel_predictor.hpp), else the efficiency curves. No in-situ ratio, no launch overhead: the
// basis a traced shape's ratio is measured against (calibrate/recalibration.hpp).
double benchmark_kernel_time_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op);
// The benchmark price at the clock a training step holds: a GEMM's (and attention's, where the profile's attention
// timings are at the reference clock) moved from reference_sm_clock_MHz to sustained_sm_clock_MHz, else to
// the step's clock (`step_clock`, one for BF16 and FP8 GEMMs alike; time x reference /
// sustained; unchanged where either is 0), every other kind as benchmarked (memory-bound kernels follow HBM, not the
// SM clock). The basis a traced shape's ratio is measured against.
double training_clock_time_ns(const GpuKernelProfile& kernels, const GpuSpec& gpu, const Op& op,
                              StepClock step_clock = {});
// The exponent of clock^-e by which `op`'s benchmark price moves from the reference clock to a step's clock:
// sm_clock_exponent (cost/sm_clock.hpp) for a GEMM, and for the other kinds that follow the SM clock (attention, the
// soft-capped loss) where the profile's timings of them are at its reference clock (attention_at_reference_clock);
// else 0. The rule of training_clock_time_ns and of a step's clocked share (sim/step_clock.hpp).
double priced_sm_clock_exponent(const GpuKernelProfile& kernels, const Op& op);
// The shape key under which calibration stores an op: "gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0"
// (",busiest=B" for a skewed grouped GEMM).
std::string kernel_shape_key(const Op& op);
// A grouped GEMM with a busiest group (GemmShape::busiest) as the GEMMs it is priced as: the busiest group alone
// (count 1) and the other count - 1 groups at their equal share; any other op as itself. Calibration measures
// these parts.
std::vector<Op> gemm_group_parts(const Op& op);
// Bytes a memory-bound op moves (reads + writes), for ops priced by bandwidth (docs/PROFILES.md lists
// the rule per kind; an op's own `bytes`, when set, wins). Throws std::logic_error for communication ops.
double memory_bound_bytes(const Op& op);
// Bytes one AdamW update moves per parameter under `precision`, reading a main gradient of `main_gradient_bytes` per
// element (30 with fp32 master weights and moments and a bf16 gradient, 34 with an fp32 one).
double optimizer_bytes_per_parameter(const OptimizerPrecision& precision, int main_gradient_bytes);

}  // namespace twin
