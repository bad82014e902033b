// libFuzzer target for every other file twin reads (PyTorch profiler traces and Hugging Face config.json included): the first byte picks the reader, the rest is the
// file's text. Each must either accept the text or throw InputError; any other exception, a crash, a
// sanitizer report or a hang is a bug. The seeds (tests/fuzz/inputs/) start with the selector byte.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "calibrate/gemm_partial.hpp"
#include "cost/profile.hpp"
#include "core/error.hpp"
#include "core/hf_config.hpp"
#include "core/model.hpp"
#include "core/input_file.hpp"
#include "core/plan_file.hpp"
#include "core/scenario_histogram.hpp"
#include "traces/kineto_classes.hpp"
#include "traces/kineto_trace.hpp"
#include "traces/ops_csv_reader.hpp"
#include "traces/run_metrics.hpp"

namespace {

// A PyTorch profiler trace is read from a file (plain or gzipped, as the bytes say): the text goes to one.
void read_kineto(const std::string& text) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("twin_fuzz_kineto_" + std::to_string(getpid()) + ".json");
  std::ofstream(path, std::ios::binary) << text;
  twin::classify_trace(twin::read_kineto_trace(path));
}

// twin calibrate's partial GEMM timings, checked against the identity of a calibration of two shapes on one GPU.
void read_gemm_partial(const std::string& text) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("twin_fuzz_partial_" + std::to_string(getpid()) + ".json");
  std::ofstream(path, std::ios::binary) << text;
  const std::vector<twin::GemmShape> shapes = {{1024, 1024, 1024, 1, false, false}, {2048, 2048, 2048, 1, false, false}};
  twin::load_gemm_partial(path, twin::gemm_partial_identity({{"quick", false}}, "00ff", 0, 1, shapes), shapes);
}

// A Hugging Face config.json as `model.hf_config` reads it, and the counts every search derives from the model.
void read_hf_config(const std::string& text) {
  const twin::ModelConfig model = twin::model_from_hf_config(twin::parse_input_json(text, "config.json"), "config.json");
  if (twin::parameter_count(model) < twin::active_parameter_count(model)) std::abort();
}

// '0'..'7': the selector bytes of the seeds, readable in a file listing.
void read_as(char reader, const std::string& text) {
  switch ((reader - '0' + 8) % 8) {
    case 0: twin::profile_from_json(twin::parse_input_json(text, "profile.json"), "profile.json"); break;
    case 1: twin::parse_plan(twin::parse_input_json(text, "best.json"), "best.json"); break;
    case 2:  // a histogram: JSON pairs where the text starts with '[', else CSV rows
      if (text.starts_with('[')) twin::parse_seq_length_histogram_json(text, "lengths.json", 1 << 20);
      else twin::parse_seq_length_histogram_csv(text, "lengths.csv", 1 << 20);
      break;
    case 3: twin::parse_run_metrics(twin::parse_input_json(text, "metrics.json"), "metrics.json"); break;
    case 5: read_kineto(text); break;
    case 6: read_gemm_partial(text); break;
    case 7: read_hf_config(text); break;
    default: twin::parse_ops_csv(text, "ops.csv"); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    read_as(static_cast<char>(data[0]), text);
  } catch (const twin::InputError&) {
    // the expected outcome for bad input
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reader %c threw a non-InputError: %s\n", static_cast<char>(data[0]), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "reader %c threw a non-exception\n", static_cast<char>(data[0]));
    std::abort();
  }
  return 0;
}
