#include "cost/gemm_rows_clock.hpp"

#include <cmath>

namespace twin {

double gemm_rows_clock_factor(const GemmRowsClock& model, double rows) {
  if (!model.enabled() || !(rows > 0)) return 1;
  return std::pow(rows / model.reference_rows, -model.exponent);
}

GemmRowsClock read_gemm_rows_clock(const JsonReader& r) {
  r.only_keys({"exponent", "reference_rows", "source"});
  GemmRowsClock model;
  model.exponent = r.required("exponent").number(0, 0.2, "expected an exponent in [0, 0.2]");
  model.reference_rows = r.required("reference_rows").number(1, 1e9, "expected a number of rows in [1, 1e9]");
  model.source = r.required("source").string();
  return model;
}

nlohmann::json gemm_rows_clock_json(const GemmRowsClock& model) {
  return {{"exponent", model.exponent}, {"reference_rows", model.reference_rows}, {"source", model.source}};
}

}  // namespace twin
