// Tables are read with JsonReader so that a corrupt row names its file and JSON path; rows are arrays
// in a declared column order to keep a profile of many tables small and readable.
#include "cost/collective_tables.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "cost/collective_steps.hpp"
#include "cost/measurement_stats.hpp"

namespace twin {
namespace {

using nlohmann::json;

const std::vector<std::string> kColumns = {"size_B", "time_us", "algbw_GBps", "busbw_GBps"};

std::string normalised_table_gpu(std::string_view name) {
  std::string out;
  for (unsigned char c : name)
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
  return out;
}

json table_json(const CollectiveTable& t) {
  json rows = json::array();
  for (const CollectivePoint& p : t.points) rows.push_back({p.size_bytes, p.time_us, p.algbw_GBps, p.busbw_GBps});
  json out = {{"gpu", t.gpu},
              {"collective", to_string(t.collective)},
              {"group_size", t.group_size},
              {"ranks_per_node", t.ranks_per_node},
              {"nodes", t.nodes},
              {"nominal_bandwidth_GBps", t.nominal_bandwidth_GBps},
              {"fit", {{"latency_us", t.fit.latency_us},
                       {"bandwidth", {{"peak", t.fit.bandwidth.peak}, {"half_work", t.fit.bandwidth.half_work}}}}},
              {"rows", rows}};
  if (t.blocks_per_peer != 1) out["blocks_per_peer"] = t.blocks_per_peer;  // profiles of one block read as before
  return out;
}

void check_columns(const JsonReader& columns) {
  if (columns.value() != json(kColumns)) columns.fail("expected [\"size_B\", \"time_us\", \"algbw_GBps\", \"busbw_GBps\"]");
}

CollectiveTable read_table(const JsonReader& r, const std::string& legacy_gpu) {
  const bool legacy = !legacy_gpu.empty();
  if (legacy) {
    r.only_keys({"collective", "group_size", "ranks_per_node", "nodes", "nominal_bandwidth_GBps", "fit", "columns", "rows"});
    if (auto columns = r.find("columns")) check_columns(*columns);
  } else {
    r.only_keys({"gpu", "collective", "group_size", "ranks_per_node", "nodes", "blocks_per_peer",
                 "nominal_bandwidth_GBps", "fit", "rows"});
  }
  CollectiveTable t;
  t.gpu = legacy ? legacy_gpu : r.required("gpu").string();
  std::vector<std::string> names;
  for (OpKind kind : kMeasuredCollectives) names.push_back(to_string(kind));
  const std::string name = r.required("collective").one_of(names, "collective");
  t.collective = kMeasuredCollectives[std::find(names.begin(), names.end(), name) - names.begin()];
  const JsonReader group_size = r.required("group_size");
  t.group_size = static_cast<int>(group_size.integer(2, 1 << 20));
  t.ranks_per_node = static_cast<int>(r.required("ranks_per_node").integer(1, t.group_size));
  const JsonReader nodes = r.required("nodes");
  t.nodes = static_cast<int>(nodes.integer(1, t.group_size));
  if (static_cast<std::int64_t>(t.ranks_per_node) * t.nodes < t.group_size)
    nodes.fail_plain(fmt::format("{} node(s) of {} rank(s) cannot hold a group of {}", t.nodes, t.ranks_per_node,
                                 t.group_size));
  if (auto blocks = r.find("blocks_per_peer")) {
    t.blocks_per_peer = static_cast<int>(blocks->integer(1, 1 << 16));
    if (t.collective != OpKind::all_to_all && t.blocks_per_peer != 1)
      blocks->fail_plain("blocks per peer other than 1 describe an all_to_all only");
  }
  t.nominal_bandwidth_GBps =
      r.required("nominal_bandwidth_GBps").number(0.1, 1e6, "expected a bandwidth in GB/s in [0.1, 1e6]");
  const JsonReader fit = r.required("fit");
  fit.only_keys({"latency_us", "bandwidth"});
  t.fit.latency_us = fit.required("latency_us").number(0, 1e6, "expected a latency in microseconds >= 0");
  const JsonReader bandwidth = fit.required("bandwidth");
  bandwidth.only_keys({"peak", "half_work"});
  // busbw may exceed the nominal link (NVLS, in-network reduction): a fraction up to 10, not 1.
  t.fit.bandwidth.peak = bandwidth.required("peak").number(1e-3, 10.0,
                                                           "expected a fraction of the nominal bandwidth in [0.001, 10]");
  t.fit.bandwidth.half_work =
      bandwidth.required("half_work").number(0, std::numeric_limits<double>::max(), "expected a number >= 0");
  for (const JsonReader& row : r.required("rows").non_empty_elements()) {
    const auto cells = row.elements();
    if (cells.size() != kColumns.size()) row.fail("expected a row [size_B, time_us, algbw_GBps, busbw_GBps]");
    CollectivePoint p;
    p.size_bytes = cells[0].positive_int64();
    p.time_us = cells[1].positive_number();
    p.algbw_GBps = cells[2].positive_number();
    p.busbw_GBps = cells[3].positive_number();
    if (!t.points.empty() && p.size_bytes <= t.points.back().size_bytes)
      cells[0].fail(fmt::format("expected a size above the previous row's {} (rows ascend)", t.points.back().size_bytes));
    t.points.push_back(p);
  }
  return t;
}

std::vector<CollectiveTable> read_tables(const std::vector<JsonReader>& entries, const std::string& legacy_gpu) {
  std::vector<CollectiveTable> tables;
  for (const JsonReader& entry : entries) {
    CollectiveTable t = read_table(entry, legacy_gpu);
    if (find_collective_table(tables, t.gpu, t.collective, t.group_size, t.ranks_per_node, t.nodes, t.blocks_per_peer))
      entry.fail_plain(fmt::format("a second {} table for {} GPUs ({} per node, {} node(s), {} block(s) per peer) on {}",
                                   to_string(t.collective), t.group_size, t.ranks_per_node, t.nodes,
                                   t.blocks_per_peer, t.gpu));
    tables.push_back(std::move(t));
  }
  return tables;
}

}  // namespace

json collective_tables_to_json(const std::vector<CollectiveTable>& tables) {
  json out = json::array();
  for (const CollectiveTable& t : tables) out.push_back(table_json(t));
  return {{"version", kCollectiveTablesVersion}, {"columns", kColumns}, {"tables", out}};
}

std::vector<CollectiveTable> collective_tables_from_json(const JsonReader& collectives) {
  collectives.only_keys({"version", "columns", "tables"});
  const JsonReader version = collectives.required("version");
  if (version.value() != kCollectiveTablesVersion)
    version.fail(fmt::format("expected collective tables version {}", kCollectiveTablesVersion));
  check_columns(collectives.required("columns"));
  return read_tables(collectives.required("tables").elements(), "");
}

std::vector<CollectiveTable> legacy_collective_tables_from_json(const JsonReader& tables, const std::string& gpu) {
  if (gpu.empty()) tables.fail_plain("legacy collective tables need provenance.gpu_preset to name their GPU");
  return read_tables(tables.elements(), gpu);
}

const CollectiveTable* find_collective_table(const std::vector<CollectiveTable>& tables, std::string_view gpu,
                                             OpKind collective, int group_size, int ranks_per_node, int nodes,
                                             int blocks_per_peer) {
  const std::string wanted = normalised_table_gpu(gpu);
  for (const CollectiveTable& t : tables)
    if (t.collective == collective && t.group_size == group_size && t.ranks_per_node == ranks_per_node &&
        t.nodes == nodes && t.blocks_per_peer == blocks_per_peer && normalised_table_gpu(t.gpu) == wanted)
      return &t;
  return nullptr;
}

double collective_fit_time_us(const CollectiveTable& table, double size_bytes) {
  const double bus_bytes = busbw_factor(table.collective, table.group_size) * size_bytes;
  const double bandwidth_bytes_per_us = table.nominal_bandwidth_GBps * 1e3 * table.fit.bandwidth.at(size_bytes);
  return algorithm_steps(table.collective, table.group_size) * table.fit.latency_us + bus_bytes / bandwidth_bytes_per_us;
}

double collective_table_time_us(const CollectiveTable& table, double size_bytes) {
  if (size_bytes <= 0) return 0;
  const CollectivePoint& first = table.points.front();
  const CollectivePoint& last = table.points.back();
  if (size_bytes < static_cast<double>(first.size_bytes))
    return first.time_us * collective_fit_time_us(table, size_bytes) /
           collective_fit_time_us(table, static_cast<double>(first.size_bytes));
  if (size_bytes > static_cast<double>(last.size_bytes))
    return last.time_us * collective_fit_time_us(table, size_bytes) /
           collective_fit_time_us(table, static_cast<double>(last.size_bytes));
  return interpolate_time_us(table.points, size_bytes);
}

}  // namespace twin
