#include "cost/rank_drift.hpp"

namespace twin {

RankDrift read_rank_drift(const JsonReader& r) {
  r.only_keys({"fixed_ns", "rate", "source"});
  RankDrift drift;
  drift.fixed_ns = r.required("fixed_ns").number(0, 1e9, "expected a time in ns in [0, 1e9]");
  drift.rate = r.required("rate").number(0, 1, "expected a share in [0, 1]");
  drift.source = r.required("source").string();
  return drift;
}

nlohmann::json rank_drift_json(const RankDrift& drift) {
  return {{"fixed_ns", drift.fixed_ns}, {"rate", drift.rate}, {"source", drift.source}};
}

}  // namespace twin
