// `twin calibrate --from-trace TRACE`, where TRACE is a PyTorch profiler trace (a .json or .json.gz file, or a
// folder of one per rank) of a framework's training steps: the measured GEMM and attention shapes fold into the
// profile as a twin run's do (calibrate/recalibration.hpp, rule 1), so shapes near them inherit their in-situ
// ratios; given the scenario that describes the traced run, the framework's other GPU work per step (unfused norms,
// casts, copies, its optimizer and gradient clipping, FSDP's copies: kernels twin's ops do not name one by one)
// against the scenario's memory-bound ops sets the memory-bound in-situ prior (GEMMs' and attention's too where the
// trace recorded no shapes); the profile names the framework and keeps the trace's step-level facts.
// docs/BRIDGES.md.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/workload.hpp"
#include "traces/recalibration_run.hpp"

namespace twin {

struct KinetoFoldRequest {
  std::filesystem::path trace;     // a file or a folder of per-rank files
  std::string profile = "builtin"; // the profile to fold into
  std::string out;                 // empty: `profile` in place when a file, else <trace folder>/profile.json
  std::string scenario;            // optional: the scenario describing the traced run (model, strategy, GPUs)
  FrameworkName framework = FrameworkName::pytorch_fsdp2;
  int jobs = 0;                    // files read at once (0: up to 4)
};

// Where the fold wrote, as a run's fold says it; record["effect"] has the classes and step facts.
using KinetoFoldOutcome = RecalibrateOutcome;

// Reads, classifies and folds everything before writing anything (a bad trace leaves every file as it was).
KinetoFoldOutcome fold_kineto_trace(const KinetoFoldRequest& request);

// True when `path` is a PyTorch profiler trace rather than a twin run folder (which holds best.json).
bool is_kineto_trace_path(const std::filesystem::path& path);

}  // namespace twin
