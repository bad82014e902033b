// The table of published training results that `twin validate` predicts (format: docs/VALIDATION.md,
// "The table"). Each row is a twin scenario (the model, batch, cluster and framework as the source states
// them; a search over what it leaves open) and the published figure, with the source it was read from.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/scenario.hpp"

namespace twin {

// How a publication counts the FLOPs behind a TFLOP/s or MFU figure, per iteration (B sequences of s
// tokens, l layers, width h, vocabulary V):
//   narayanan2021    96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (Narayanan et al. 2021, eq. 3: recompute counted)
//   korthikanti2022  72 B s l h^2 (1 + s/(6h) + V/(12 l h)) (Korthikanti et al. 2022, the MFU of Table 5)
//   megatron2024     Megatron-LM's num_floating_point_operations of July 2024 (commit f2e5db4): 12 B s l h^2
//                    ((1 + g/a + s/h) a d/h + ffn/h (3/2 gated) + V/(2 l h)), attention not halved
//   palm             Chowdhery et al. 2022 (PaLM, appendix B): (6 N + 12 l a d s) per token, N the
//                    parameters the row states
enum class FlopsFormula { none, narayanan2021, korthikanti2022, megatron2024, palm };

// The published figure and how it becomes an iteration time.
struct PublishedFigure {
  std::string metric;        // iteration_time_s | tokens_per_s_per_gpu | tflops_per_gpu | mfu
  double value = 0;
  FlopsFormula formula = FlopsFormula::none;  // tflops_per_gpu and mfu
  double peak_tflops = 0;    // mfu: the peak the source divides by
  double parameters = 0;     // palm: N
};

struct PublishedRow {
  std::string json_path;     // "/rows/3", for messages
  std::string id;
  std::string group;
  std::string reference;     // source: publication
  std::string table;         //         table or figure
  std::string url;
  std::string confidence;    // high | medium | low, as transcribed
  std::string unknowns;      // what the source leaves open and how the scenario chose it
  PublishedFigure published;
  Scenario scenario;
  double published_iteration_s = 0;  // the figure as an iteration time (published_iteration_time)
};

struct PublishedTable {
  std::string source;        // the file
  std::vector<PublishedRow> rows;
};

// FLOPs of one iteration of `scenario` as `formula` counts them (0 for none).
double published_flops_per_iteration(FlopsFormula formula, const Scenario& scenario, double parameters = 0);
// The iteration time the figure implies for `scenario` on `gpus` GPUs.
double published_iteration_time(const PublishedFigure& figure, const Scenario& scenario, int gpus);

// Reads and checks the whole table; an InputError names the file and the JSON path of the first bad value.
PublishedTable load_published_table(const std::filesystem::path& path);
PublishedTable parse_published_table(const nlohmann::json& document, const std::string& source);

}  // namespace twin
