// `twin calibrate`: its options in every build. Measuring GPUs needs the CUDA toolkit (the hand-over is
// cli/calibrate_gpu_command.cpp); --from-trace, folding an executed run into a profile, and
// --from-nccl-tests, folding nccl-tests logs into its collective tables, are CPU work.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "calibrate/gpu/calibration.hpp"  // the request's fields and defaults only: no CUDA in the header
#include "calibrate/nccl_tests_import.hpp"
#include "cost/shipped_profiles.hpp"
#include "cli/commands.hpp"
#include "core/attention_implementation.hpp"
#include "core/cluster.hpp"
#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "traces/kineto_fold.hpp"
#include "traces/recalibration_run.hpp"
#ifdef TWIN_WITH_CUDA
#include "cli/calibrate_gpu_command.hpp"
#endif
#include "cli/gpu_binary.hpp"

namespace twin {

struct CalibrateOptions {
  gpu::CalibrationRequest request;
  std::string from_trace;
  std::vector<std::string> nccl_logs;
  std::string collective;  // --collective: the nccl-tests collective of logs that do not say
  std::string gpu;         // --gpu: the GPU preset of logs whose device name maps to none
  std::string profile;
  std::string framework;   // --framework: whose PyTorch profiler trace --from-trace reads
  CLI::App* command = nullptr;
  CLI::Option* out = nullptr;
};

namespace {
// CLI11 keeps pointers to the option targets, so they live as long as the program.
CalibrateOptions& calibrate_options() {
  static CalibrateOptions options;
  return options;
}

// A PyTorch profiler trace of a framework's steps (traces/kineto_fold.hpp).
int run_from_framework_trace(const CalibrateOptions& options) {
  KinetoFoldRequest request;
  request.trace = options.from_trace;
  if (!options.profile.empty()) request.profile = options.profile;
  if (options.out->count() > 0) request.out = options.request.out;
  request.scenario = options.request.scenario;
  if (!options.framework.empty()) request.framework = *framework_name(options.framework);
  const KinetoFoldOutcome outcome = fold_kineto_trace(request);
  const nlohmann::json& effect = outcome.record.at("effect");
  fmt::print("folded {} GEMM and attention ops of {} ({} file(s), framework {}) into {} ({} entries changed)\n",
             effect.at("ops_folded").get<int>(), options.from_trace, effect.at("trace_files").get<int>(),
             to_string(request.framework), outcome.profile_path.generic_string(), outcome.record.at("changes").size());
  fmt::print("{:<20} {:>10} {:>11} {:>7}  matched on (the largest)\n", "class", "kernels", "ms", "share");
  for (const auto& [name, c] : effect.at("classes").items()) {
    const nlohmann::json& matched = c.at("matched_on");
    fmt::print("{:<20} {:>10} {:>11.3f} {:>6.2f}%  {}\n", name, c.at("activities").get<std::int64_t>(),
               c.at("ms").get<double>(), 100 * c.at("share").get<double>(),
               matched.empty() ? "" : matched.front().at("matched_on").get<std::string>());
  }
  const nlohmann::json& facts = effect.at("step_facts");
  fmt::print("step (median over {} rank(s) x {} step(s)): {:.3f} ms on the GPU, {:.3f} ms of kernels, {:.3f} ms idle "
             "(host gaps); NCCL {:.3f} ms, {:.0f}% of it beside compute\n",
             facts.at("ranks").get<int>(), facts.at("steps").get<int>(), facts.at("step_ms").get<double>(),
             facts.at("kernel_busy_ms").get<double>(), facts.at("host_idle_ms").get<double>(),
             facts.at("collective_ms").get<double>(), 100 * facts.at("collective_overlapped_share").get<double>());
  if (effect.contains("priors"))
    for (const auto& [family, prior] : effect.at("priors").items())
      fmt::print("{} in-situ prior {:.3f} -> {:.3f} ({:.3f} ms a step traced against {:.3f} ms priced)\n", family,
                 prior.at("old").get<double>(), prior.at("new").get<double>(),
                 prior.at("traced_ms_per_step").get<double>(), prior.at("priced_ms_per_step").get<double>());
  else
    fmt::print("no --scenario: only GEMM and attention shapes folded (the scenario of the traced run lets the other "
               "kernels set the in-situ priors)\n");
  if (!outcome.previous_path.empty()) fmt::print("previous profile kept as {}\n", outcome.previous_path.generic_string());
  fmt::print("what changed and why: {} and {}\n", outcome.changes_json.generic_string(), outcome.changes_md.generic_string());
  return 0;
}

int run_from_trace(const CalibrateOptions& options) {
  if (is_kineto_trace_path(options.from_trace)) return run_from_framework_trace(options);
  if (!options.request.scenario.empty() || !options.framework.empty()) {
    spdlog::error("--scenario and --framework go with a PyTorch profiler trace; {} is a twin run folder (best.json "
                  "describes its plan)", options.from_trace);
    return 2;
  }
  RecalibrateRequest request;
  request.run_dir = options.from_trace;
  request.profile = options.profile;
  if (options.out->count() > 0) request.out = options.request.out;
  const RecalibrateOutcome outcome = recalibrate_from_run(request);
  const nlohmann::json& effect = outcome.record.at("effect");
  fmt::print("folded {} measured ops of {} into {} ({} entries changed)\n", effect.at("ops_folded").get<int>(),
             options.from_trace, outcome.profile_path.generic_string(), outcome.record.at("changes").size());
  if (const int left_out = effect.at("ops_other_attention").get<int>(); left_out > 0)
    fmt::print("left out {} attention ops: the run chose another attention implementation than the one profiles "
               "price ({})\n", left_out, to_string(kDefaultAttentionImplementation));
  if (const int left_out = effect.at("ops_other_kernel_revision").get<int>(); left_out > 0)
    fmt::print("left out {} ops whose kernels the run ran in another revision than the profile's calibration "
               "timed (core/kernel_revisions.hpp)\n", left_out);
  if (!outcome.previous_path.empty()) fmt::print("previous profile kept as {}\n", outcome.previous_path.generic_string());
  fmt::print("what changed and why: {} and {}\n", outcome.changes_json.generic_string(),
             outcome.changes_md.generic_string());
  if (effect.contains("curve_sm_clock_MHz")) {
    const double run_MHz = effect.at("run_sm_clock_MHz").get<double>(), curve_MHz = effect.at("curve_sm_clock_MHz").get<double>();
    fmt::print("the run's GPUs held {:.0f} MHz by NVML where the profile's clock curve gives its plan {:.0f} MHz "
               "({:+.1f}%); its traced shapes state the curve's clock (NVML's scale is not the probe's: on an H100 at "
               "its cap NVML read 8-9% below it) and the curve is kept (one plan's offset does not carry to others); "
               "a curve measured on another GPU is replaced by `twin calibrate --sustained-clock --profile P` on this "
               "one\n",
               run_MHz, curve_MHz, 100 * (run_MHz / curve_MHz - 1));
  }
  if (effect.contains("measured_iteration_ns"))
    fmt::print("the run's plan: predicted {:.3f} ms before, {:.3f} ms after; measured {:.3f} ms (error {:+.1f}% -> {:+.1f}%)\n",
               effect.at("predicted_before_ns").get<double>() / 1e6, effect.at("predicted_after_ns").get<double>() / 1e6,
               effect.at("measured_iteration_ns").get<double>() / 1e6, 100 * effect.at("error_before").get<double>(),
               100 * effect.at("error_after").get<double>());
  return 0;
}

// Everything is read and checked before the one write: a bad log leaves the profile as it was.
int run_from_nccl_tests(const CalibrateOptions& options) {
  std::optional<OpKind> collective;
  if (!options.collective.empty()) collective = nccl_tests_collective(options.collective);
  std::vector<NcclTestsRun> runs;
  for (const std::string& log : options.nccl_logs) {
    std::vector<NcclTestsRun> read =
        parse_nccl_tests_log(read_input_file(log, "an nccl-tests log (the output of all_reduce_perf, ...)"), log, collective);
    for (NcclTestsRun& run : read) runs.push_back(std::move(run));
  }
  const std::string profile_name = options.profile.empty() ? "builtin" : options.profile;
  std::optional<std::string> gpu;
  if (!options.gpu.empty()) gpu = options.gpu;
  NcclTestsFold fold = fold_nccl_tests(load_profile(profile_name), runs, gpu);
  // --out, else the --profile file in place; a built-in or shipped profile goes to --out's default.
  const std::filesystem::path out =
      options.out->count() > 0 || is_named_profile(profile_name) ? options.request.out : profile_name;
  save_profile(fold.profile, out);
  for (const std::string& line : fold.summary) fmt::print("{}\n", line);
  fmt::print("wrote {} ({} collective table(s) from {} log(s), profile {})\n", out.generic_string(), fold.summary.size(),
             options.nccl_logs.size(), profile_name);
  return 0;
}

// The options add_calibrate_command declares that others exclude or need.
struct CalibrateFlags {
  CLI::Option *scenario = nullptr, *gpus = nullptr, *quick = nullptr, *quiet = nullptr, *max_message = nullptr;
  CLI::Option *check = nullptr, *check_out = nullptr, *check_gemms = nullptr;
  CLI::Option *sustained_clock = nullptr, *power_model = nullptr, *collectives = nullptr;
  CLI::Option *from_trace = nullptr, *from_nccl = nullptr;
};

// What a calibration on this machine's GPUs measures, where it writes and what it checks.
void add_measurement_options(CLI::App* calibrate, CalibrateOptions& options, CalibrateFlags& flags) {
  flags.scenario = calibrate->add_option("--scenario", options.request.scenario,
                        "also measure the exact GEMM shapes of this scenario's feasible candidate strategies;\n"
                        "with --from-trace of a PyTorch profiler trace: the scenario describing the traced run");
  options.out = calibrate->add_option("--out", options.request.out,
                                      "profile to write (atomically); with --from-trace, default: the --profile file in\n"
                                      "place, or RUN_DIR/profile.json for a built-in or shipped profile")
                    ->capture_default_str();
  flags.gpus = calibrate->add_option("--gpus", options.request.gpus, "use the first N GPUs (default: all)")
                          ->check(CLI::NonNegativeNumber);
  flags.quick =
      calibrate->add_flag("--quick", options.request.quick, "fewer shapes, sizes (powers of 4) and repetitions");
  flags.quiet = calibrate->add_flag("--quiet", options.request.quiet, "no progress lines: warnings and errors only");
  flags.max_message = calibrate->add_option("--max-message-bytes", options.request.max_message_bytes,
                        "largest collective message (nccl-tests' S)")
      ->capture_default_str()
      ->check(CLI::Range(4096ll, 1ll << 33));
  flags.check = calibrate->add_option("--check", options.request.check_profile,
                        "instead of calibrating, check PROFILE against fresh measurements of collective sizes and GEMM\n"
                        "shapes it did not measure (same harnesses); writes check.csv and check.md, exits 1 on a miss");
  flags.check_out = calibrate->add_option("--check-out", options.request.check_out, "directory for the --check tables")
      ->capture_default_str();
  flags.check_gemms = calibrate->add_option("--check-gemms", options.request.check_gemms,
                        "with --check: the GEMM shapes to check, a JSON array of {\"m\", \"n\", \"k\"[, \"count\",\n"
                        "\"transpose_a\", \"transpose_b\", \"origin\"]} (default: 17 model GEMMs off the grid)")
      ->needs(flags.check);
  flags.sustained_clock = calibrate->add_flag("--sustained-clock", options.request.sustained_clock_only,
                        "with --profile: measure only the SM clock each GPU sustains at its power limit under loads of\n"
                        "several GEMM duties under BF16 and FP8 GEMMs (~30 s on one H200, every GPU at once) and write\n"
                        "the curves into the profile's section of this GPU (--out, default: the profile in place), every\n"
                        "other entry as it was");
  flags.power_model = calibrate->add_flag("--power-model", options.request.power_model,
                        "also measure the GPU's power model after the BF16 clock curve (six loads, ~18 s; written as\n"
                        "power_model, which prices a step only where the profile has no curve: a research instrument)");
  flags.collectives = calibrate->add_flag("--collectives", options.request.collectives_only,
                        "with --profile: measure only the collective tables (every group size; the all-to-all also in\n"
                        "2 to 128 blocks per peer, as expert parallelism's dispatch sends it), the interference of each\n"
                        "collective with the GEMMs and memory-bound kernels beside it (recorded in provenance) and the\n"
                        "host's time to issue a grouped GEMM call, and add those the profile lacks (--out, default:\n"
                        "the profile in place), every other entry as it was");
}

// The folds that need no GPU: a run's trace or a framework's, nccl-tests logs; and the profile they start from.
void add_fold_options(CLI::App* calibrate, CalibrateOptions& options, CalibrateFlags& flags) {
  flags.from_trace = calibrate->add_option("--from-trace", options.from_trace,
                        "recalibrate from the run folder of `twin execute` (best.json, ops.csv, metrics.json): exact\n"
                        "shapes it measured become profile entries, other shapes of each op kind get a fitted\n"
                        "correction; keeps the previous profile (P.previous.json) and writes P.changes.json/.md.\n"
                        "Or from a PyTorch profiler trace (torch.profiler's Chrome JSON, .json or .json.gz, or a\n"
                        "folder of one per rank; record_shapes=True): its GEMM and attention shapes, and with\n"
                        "--scenario its other kernels' time per step (docs/BRIDGES.md)");
  calibrate->add_option("--framework", options.framework,
                        "with --from-trace of a PyTorch profiler trace: the framework that ran it (default\n"
                        "pytorch-fsdp2; megatron-core for Megatron-LM/NeMo's --use-pytorch-profiler)")
      ->check(CLI::IsMember({"pytorch-fsdp2", "megatron-core"}))
      ->needs(flags.from_trace);
  flags.from_nccl = calibrate->add_option(
      "--from-nccl-tests", options.nccl_logs,
      "fold the standard output of NVIDIA nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf,\n"
      "alltoall_perf, sendrecv_perf; one or more logs) into the profile's collective tables: the out-of-place\n"
      "time of every size, over the GPUs and hosts the log's Rank lines name; a table over a placement the\n"
      "profile holds is replaced");
  calibrate->add_option("--collective", options.collective,
                        "with --from-nccl-tests: the collective of logs that do not name it (nccl-tests before 2.13)\n"
                        "and whose file name does not either")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"}))
      ->needs(flags.from_nccl);
  calibrate->add_option("--gpu", options.gpu,
                        "with --from-nccl-tests: the GPU preset of the log's GPUs, where their device name maps to none")
      ->check(CLI::Validator(
          [](const std::string& name) {
            return gpu_preset(name) ? std::string() : "expected a GPU preset: " + join_names(gpu_preset_names());
          },
          "GPU preset"))
      ->needs(flags.from_nccl);
  calibrate->add_option("--profile", options.profile,
                        "a profile this machine's calibration wrote, to which only the shapes it lacks are added: the\n"
                        "kernel grid's (a profile of an older grid) and, with --scenario, the scenario's (default\n"
                        "--out: the profile in place);\n"
                        "with --from-trace: the profile to update (default: the plan's \"profile\");\n"
                        "with --from-nccl-tests: the profile to add the tables to (default: builtin)");
}

// Which options cannot go together: the measurement modes with each other, the folds with every GPU option.
void exclude_conflicting(const CalibrateFlags& flags) {
  flags.sustained_clock->excludes(flags.scenario)->excludes(flags.check);
  flags.collectives->excludes(flags.scenario)->excludes(flags.check)->excludes(flags.sustained_clock);
  flags.power_model->excludes(flags.check)->excludes(flags.collectives);
  for (CLI::Option* gpu_only : {flags.scenario, flags.gpus, flags.quick, flags.quiet, flags.max_message, flags.check,
                                flags.check_out, flags.check_gemms, flags.sustained_clock, flags.collectives,
                                flags.power_model}) {
    // A framework trace's fold reads the scenario.
    if (gpu_only != flags.scenario) flags.from_trace->excludes(gpu_only);
    flags.from_nccl->excludes(gpu_only);
  }
  flags.from_nccl->excludes(flags.from_trace);
}

}  // namespace

CalibrateOptions& add_calibrate_command(CLI::App& app) {
  CalibrateOptions& options = calibrate_options();
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "Measure this machine's GPUs and write a profile: cuBLASLt GEMMs timed with CUPTI, NCCL all-reduce, all-gather,\n"
      "reduce-scatter, all-to-all and send/recv over every group size (nccl-tests' busbw), overlap interference (pair by\n"
      "pair: each collective beside GEMMs of several waves and a memory-bound kernel) and\n"
      "usable memory. One process per GPU (started here, or by mpirun/srun with NCCL_COMM_ID set).\n"
      "With --from-trace, no GPU: fold the measured op times of a `twin execute` run into a profile.\n"
      "With --from-nccl-tests, no GPU: fold nccl-tests logs (all_reduce_perf, ...) into a profile's collective tables.");
  CalibrateFlags flags;
  add_measurement_options(calibrate, options, flags);
  add_fold_options(calibrate, options, flags);
  exclude_conflicting(flags);
  calibrate->footer(
      "Examples:\n"
      "  twin calibrate --out my.json\n"
      "  twin calibrate --scenario scenarios/llama3-8b-4xH200.json --out my.json\n"
      "  twin calibrate --scenario scenarios/llama2-7b-8xH100.json --profile my.json\n"
      "  twin calibrate --check my.json --check-out check/\n"
      "  twin calibrate --sustained-clock --profile my.json\n"
      "  twin calibrate --sustained-clock --power-model --profile my.json\n"
      "  twin calibrate --collectives --profile my.json\n"
      "  twin calibrate --check my.json --check-gemms my-gemms.json\n"
      "  twin calibrate --from-trace run/ --profile my.json\n"
      "  twin calibrate --from-trace traces/ --scenario my-run.json --profile builtin --out pytorch.json\n"
      "  twin calibrate --from-nccl-tests all_reduce_perf.log all_gather_perf.log --profile my.json\n"
      "  twin simulate scenarios/llama3-8b-4xH200.json --profile my.json");
  options.command = calibrate;
  return options;
}

bool calibrate_selected(const CLI::App& app) { return app.got_subcommand("calibrate"); }

int run_calibrate(const CLI::App&) {
  const CalibrateOptions& options = calibrate_options();
  if (!options.from_trace.empty()) return run_from_trace(options);
  if (!options.nccl_logs.empty()) return run_from_nccl_tests(options);
  gpu::CalibrationRequest request = options.request;
  if (request.sustained_clock_only && options.profile.empty()) {
    spdlog::error("--sustained-clock needs --profile (the profile to write the curve into)");
    return 2;
  }
  if (request.collectives_only && options.profile.empty()) {
    spdlog::error("--collectives needs --profile (the profile to add the tables to)");
    return 2;
  }
  if (request.power_model && !options.profile.empty() && !request.sustained_clock_only) {
    spdlog::error("--power-model with --profile needs --sustained-clock (adding shapes to a profile measures no clock)");
    return 2;
  }
  if (!options.profile.empty()) {
    if (!request.check_profile.empty()) {
      spdlog::error("--profile does not go with --check (--check names the profile it checks)");
      return 2;
    }
    request.profile = options.profile;
    if (options.out->count() == 0) {  // in place, unless it names a built-in or shipped profile
      if (is_named_profile(options.profile)) {
        spdlog::error("--profile {} names a shipped profile: give --out for the completed copy", options.profile);
        return 2;
      }
      request.out = options.profile;
    }
  }
#ifdef TWIN_WITH_CUDA
  return run_gpu_calibration(request);
#elif defined(TWIN_GPU_BINARY)
  return run_gpu_binary();  // twin-gpu parses the same arguments again and measures
#else
  spdlog::error("twin calibrate measures GPUs and this twin was built without the CUDA toolkit (TWIN_WITH_CUDA off): "
                "build it with CUDA on a GPU machine, or use --from-trace RUN_DIR to recalibrate from a recorded run");
  return 1;
#endif
}

}  // namespace twin
