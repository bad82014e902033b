// How the SM clock a GPU holds at its power limit moves with the rows of a step's GEMMs (the tokens of a micro-batch
// on this GPU), as a profile states it for one kind of GPU (the optional "gemm_rows_clock" key of a GPU's kernel
// profile). The sustained-clock curve (cost/sustained_clock.hpp) is measured with 8192^3 GEMMs and reads a step's
// clock off its GEMM duty alone; at the same duty, steps of fewer rows hold more: one-H200 training runs at
// micro-batch 1 held 2-6% more clock than the same plans at 4 (docs/ACCURACY.md "The step clock by GEMM rows"), and
// GEMMs alone back to back at the cap 1.5-2% more at a quarter of the rows, the same widths and the same FLOP rate
// (2026-12-01): fewer rows, less energy a FLOP. Fitted on one-H200 training runs, not measured by calibration:
// docs/PROFILES.md "The clock by GEMM rows" names the fit set and the held-out error.
//
//   clock = curve clock x (rows / reference_rows)^-exponent
//
// rows: the FLOP-weighted geometric mean of the rows (m) of the step's forward GEMMs (sim/step_clock.hpp): its tokens
// per micro-batch for a dense model. Applied where the curve prices a step without FP8 or grouped GEMMs (the fit set
// has neither).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"

namespace twin {

struct GemmRowsClock {
  double exponent = 0;        // how fast the clock rises as the rows shrink (0: not at all)
  double reference_rows = 0;  // the rows at which the curve's clock holds as it is
  std::string source;         // the runs the values were fitted on
  bool enabled() const { return exponent > 0 && reference_rows > 0; }
  bool operator==(const GemmRowsClock&) const = default;
};

// The factor on the curve's clock of a step whose forward GEMMs have `rows`; 1 where the model is not enabled or the
// step has no GEMM (rows 0).
double gemm_rows_clock_factor(const GemmRowsClock& model, double rows);

// The key's object; errors name their JSON path: exponent in [0, 0.2], reference_rows in [1, 1e9], source a string.
GemmRowsClock read_gemm_rows_clock(const JsonReader& r);
nlohmann::json gemm_rows_clock_json(const GemmRowsClock& model);

}  // namespace twin
