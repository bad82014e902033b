// training.seq_length_histogram: a sequence-length distribution given inline or as a JSON or CSV file of
// (length, count) pairs, and the hot-switching preconditions that depend on it (an addition to
// DESIGN.md's scenario format).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "core/scenario.hpp"

namespace twin {

// `r` is the value of training.seq_length_histogram: an array of [length, count] pairs, or a file name
// relative to `scenario_folder` ending in .json (the same array) or .csv ("length,count" rows, an optional
// header). Lengths strictly increasing in [1, max_length], counts >= 0 with a positive sum. Errors name the
// histogram file and the JSON path or CSV line.
std::vector<SeqLengthCount> parse_seq_length_histogram(const JsonReader& r, const std::filesystem::path& scenario_folder,
                                                       std::int64_t max_length);
// The same checks on a file's text (for tests and the fuzzer); `file` names it in errors. A .csv file is read line by
// line and a .json file pair by pair (SAX): what either keeps is the bars, at most one per length.
std::vector<SeqLengthCount> parse_seq_length_histogram_csv(const std::string& text, const std::string& file,
                                                           std::int64_t max_length);
std::vector<SeqLengthCount> parse_seq_length_histogram_json(const std::string& text, const std::string& file,
                                                            std::int64_t max_length);

// search.hot_switch = true needs a length distribution, a dense model and at most kMaxHotSwitchGpus GPUs
// (the switch is simulated with one rank class per GPU and phase). `hot_switch` is the flag's reader.
inline constexpr int kMaxHotSwitchGpus = 64;
void check_hot_switch_preconditions(const Scenario& scenario, const JsonReader& hot_switch);

}  // namespace twin
