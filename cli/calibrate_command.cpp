// `twin calibrate`: its options in every build. Measuring GPUs needs the CUDA toolkit (the hand-over is
// cli/calibrate_gpu_command.cpp); --from-trace, folding an executed run into a profile, is CPU work.
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "calibrate/gpu/calibration.hpp"  // the request's fields and defaults only: no CUDA in the header
#include "cli/commands.hpp"
#include "traces/recalibration_run.hpp"
#ifdef TWIN_WITH_CUDA
#include "cli/calibrate_gpu_command.hpp"
#endif

namespace twin {

struct CalibrateOptions {
  gpu::CalibrationRequest request;
  std::string from_trace;
  std::string profile;
  CLI::App* command = nullptr;
  CLI::Option* out = nullptr;
};

namespace {
// CLI11 keeps pointers to the option targets, so they live as long as the program.
CalibrateOptions& calibrate_options() {
  static CalibrateOptions options;
  return options;
}

int run_from_trace(const CalibrateOptions& options) {
  RecalibrateRequest request;
  request.run_dir = options.from_trace;
  request.profile = options.profile;
  if (options.out->count() > 0) request.out = options.request.out;
  const RecalibrateOutcome outcome = recalibrate_from_run(request);
  const nlohmann::json& effect = outcome.record.at("effect");
  fmt::print("folded {} measured ops of {} into {} ({} entries changed)\n", effect.at("ops_folded").get<int>(),
             options.from_trace, outcome.profile_path.generic_string(), outcome.record.at("changes").size());
  if (!outcome.previous_path.empty()) fmt::print("previous profile kept as {}\n", outcome.previous_path.generic_string());
  fmt::print("what changed and why: {} and {}\n", outcome.changes_json.generic_string(),
             outcome.changes_md.generic_string());
  if (effect.contains("measured_iteration_ns"))
    fmt::print("the run's plan: predicted {:.3f} ms before, {:.3f} ms after; measured {:.3f} ms (error {:+.1f}% -> {:+.1f}%)\n",
               effect.at("predicted_before_ns").get<double>() / 1e6, effect.at("predicted_after_ns").get<double>() / 1e6,
               effect.at("measured_iteration_ns").get<double>() / 1e6, 100 * effect.at("error_before").get<double>(),
               100 * effect.at("error_after").get<double>());
  return 0;
}
}  // namespace

CalibrateOptions& add_calibrate_command(CLI::App& app) {
  CalibrateOptions& options = calibrate_options();
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "Measure this machine's GPUs and write a profile: cuBLASLt GEMMs timed with CUPTI, NCCL all-reduce, all-gather,\n"
      "reduce-scatter, all-to-all and send/recv over every group size (nccl-tests' busbw), overlap interference and\n"
      "usable memory. One process per GPU (started here, or by mpirun/srun with NCCL_COMM_ID set).\n"
      "With --from-trace, no GPU: fold the measured op times of a `twin execute` run into a profile.");
  CLI::Option* scenario = calibrate->add_option("--scenario", options.request.scenario,
                        "also measure the exact GEMM shapes of this scenario's feasible candidate strategies");
  options.out = calibrate->add_option("--out", options.request.out,
                                      "profile to write (atomically); with --from-trace, default: the --profile file in\n"
                                      "place, or RUN_DIR/profile.json for a built-in or shipped profile")
                    ->capture_default_str();
  CLI::Option* gpus = calibrate->add_option("--gpus", options.request.gpus, "use the first N GPUs (default: all)")
                          ->check(CLI::NonNegativeNumber);
  CLI::Option* quick = calibrate->add_flag("--quick", options.request.quick, "fewer shapes, sizes (powers of 4) and repetitions");
  CLI::Option* max_message = calibrate->add_option("--max-message-bytes", options.request.max_message_bytes,
                        "largest collective message (nccl-tests' S)")
      ->capture_default_str()
      ->check(CLI::Range(4096ll, 1ll << 33));
  CLI::Option* check = calibrate->add_option("--check", options.request.check_profile,
                        "instead of calibrating, check PROFILE against fresh measurements of collective sizes and GEMM\n"
                        "shapes it did not measure (same harnesses); writes check.csv and check.md, exits 1 on a miss");
  CLI::Option* check_out = calibrate->add_option("--check-out", options.request.check_out, "directory for the --check tables")
      ->capture_default_str();
  CLI::Option* check_gemms = calibrate->add_option("--check-gemms", options.request.check_gemms,
                        "with --check: the GEMM shapes to check, a JSON array of {\"m\", \"n\", \"k\"[, \"count\",\n"
                        "\"transpose_a\", \"transpose_b\", \"origin\"]} (default: 17 model GEMMs off the grid)")
      ->needs(check);
  CLI::Option* from_trace = calibrate->add_option("--from-trace", options.from_trace,
                        "recalibrate from the run folder of `twin execute` (best.json, ops.csv, metrics.json): exact\n"
                        "shapes it measured become profile entries, other shapes of each op kind get a fitted\n"
                        "correction; keeps the previous profile (P.previous.json) and writes P.changes.json/.md");
  calibrate->add_option("--profile", options.profile,
                        "with --from-trace: the profile to update (default: the plan's \"profile\")")
      ->needs(from_trace);
  for (CLI::Option* gpu_only : {scenario, gpus, quick, max_message, check, check_out, check_gemms}) from_trace->excludes(gpu_only);
  calibrate->footer(
      "Examples:\n"
      "  twin calibrate --out my.json\n"
      "  twin calibrate --scenario scenarios/llama3-8b-4xH200.json --out my.json\n"
      "  twin calibrate --check my.json --check-out check/\n"
      "  twin calibrate --check my.json --check-gemms my-gemms.json\n"
      "  twin calibrate --from-trace run/ --profile my.json\n"
      "  twin simulate scenarios/llama3-8b-4xH200.json --profile my.json");
  options.command = calibrate;
  return options;
}

bool calibrate_selected(const CLI::App& app) { return app.got_subcommand("calibrate"); }

int run_calibrate(const CLI::App&) {
  const CalibrateOptions& options = calibrate_options();
  if (!options.from_trace.empty()) return run_from_trace(options);
#ifdef TWIN_WITH_CUDA
  return run_gpu_calibration(options.request);
#else
  spdlog::error("twin calibrate measures GPUs and this twin was built without the CUDA toolkit (TWIN_WITH_CUDA off): "
                "build it with CUDA on a GPU machine, or use --from-trace RUN_DIR to recalibrate from a recorded run");
  return 1;
#endif
}

}  // namespace twin
