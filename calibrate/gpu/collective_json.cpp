// Rows are [size_B, time_us, algbw_GBps, busbw_GBps] arrays under a "columns" header, to keep the
// tables readable and small.
#include "calibrate/gpu/collective_json.hpp"

#include <stdexcept>

#include "calibrate/gpu/nccl_bench.hpp"

namespace twin::gpu {

using nlohmann::json;

json collectives_to_json(const std::vector<CollectiveTable>& tables) {
  json out = json::array();
  for (const CollectiveTable& t : tables) {
    json rows = json::array();
    for (const CollectivePoint& p : t.points) rows.push_back({p.size_bytes, p.time_us, p.algbw_GBps, p.busbw_GBps});
    out.push_back({{"collective", to_string(t.collective)},
                   {"group_size", t.group_size},
                   {"ranks_per_node", t.ranks_per_node},
                   {"nodes", t.nodes},
                   {"nominal_bandwidth_GBps", t.nominal_bandwidth_GBps},
                   {"fit", {{"latency_us", t.fit.latency_us},
                            {"bandwidth", {{"peak", t.fit.bandwidth.peak}, {"half_work", t.fit.bandwidth.half_work}}}}},
                   {"columns", {"size_B", "time_us", "algbw_GBps", "busbw_GBps"}},
                   {"rows", rows}});
  }
  return out;
}

std::vector<CollectiveTable> collectives_from_json(const json& document, const std::string& source) {
  if (!document.is_array()) throw std::runtime_error(source + ": collectives: expected an array");
  std::vector<CollectiveTable> tables;
  for (std::size_t i = 0; i < document.size(); ++i) {
    const json& entry = document[i];
    const std::string where = source + ": collectives/" + std::to_string(i);
    try {
      CollectiveTable t;
      const std::string name = entry.at("collective").get<std::string>();
      bool known = false;
      for (OpKind kind : kCalibratedCollectives)
        if (to_string(kind) == name) {
          t.collective = kind;
          known = true;
        }
      if (!known) throw std::runtime_error("unknown collective \"" + name + "\"");
      t.group_size = entry.at("group_size").get<int>();
      t.ranks_per_node = entry.at("ranks_per_node").get<int>();
      t.nodes = entry.at("nodes").get<int>();
      t.nominal_bandwidth_GBps = entry.at("nominal_bandwidth_GBps").get<double>();
      t.fit.latency_us = entry.at("fit").at("latency_us").get<double>();
      t.fit.bandwidth.peak = entry.at("fit").at("bandwidth").at("peak").get<double>();
      t.fit.bandwidth.half_work = entry.at("fit").at("bandwidth").at("half_work").get<double>();
      for (const json& row : entry.at("rows")) {
        if (!row.is_array() || row.size() != 4) throw std::runtime_error("a row must be [size_B, time_us, algbw_GBps, busbw_GBps]");
        t.points.push_back({row[0].get<Bytes>(), row[1].get<double>(), row[2].get<double>(), row[3].get<double>()});
      }
      if (t.points.empty()) throw std::runtime_error("no rows");
      tables.push_back(std::move(t));
    } catch (const json::exception& e) {
      throw std::runtime_error(where + ": " + e.what());
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
  }
  return tables;
}

}  // namespace twin::gpu
