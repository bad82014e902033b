// libFuzzer target for every other file twin reads: the first byte picks the reader, the rest is the
// file's text. Each must either accept the text or throw InputError; any other exception, a crash, a
// sanitizer report or a hang is a bug. The seeds (tests/fuzz/inputs/) start with the selector byte.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cost/profile.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/plan_file.hpp"
#include "core/scenario_histogram.hpp"
#include "traces/ops_csv_reader.hpp"
#include "traces/run_metrics.hpp"

namespace {

// '0'..'4': the selector bytes of the seeds, readable in a file listing.
void read_as(char reader, const std::string& text) {
  switch ((reader - '0' + 5) % 5) {
    case 0: twin::profile_from_json(twin::parse_input_json(text, "profile.json"), "profile.json"); break;
    case 1: twin::parse_plan(twin::parse_input_json(text, "best.json"), "best.json"); break;
    case 2:  // a histogram: JSON pairs where the text starts with '[', else CSV rows
      if (text.starts_with('[')) twin::parse_seq_length_histogram_json(text, "lengths.json", 1 << 20);
      else twin::parse_seq_length_histogram_csv(text, "lengths.csv", 1 << 20);
      break;
    case 3: twin::parse_run_metrics(twin::parse_input_json(text, "metrics.json"), "metrics.json"); break;
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
