// Points are built on the JSON document, not on a parsed Scenario: a point then gets every check a scenario gets
// (a sequence beyond learned position embeddings, a batch the search cannot split, GPUs beyond the limits).
#include "core/scenario_sweep.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/cluster.hpp"

namespace twin {
namespace {

template <class T>
void require_distinct(const std::vector<T>& values, const std::vector<JsonReader>& elements) {
  for (std::size_t i = 1; i < values.size(); ++i)
    if (std::find(values.begin(), values.begin() + i, values[i]) != values.begin() + i)
      elements[i].fail("expected distinct values, a value listed once");
}

template <class T, class Read>
std::vector<T> parse_list(const JsonReader& list, Read read) {
  const std::vector<JsonReader> elements = list.non_empty_elements();
  if (elements.size() > kMaxSweepPoints)
    list.fail_plain(fmt::format("expected at most {} values, got {}", kMaxSweepPoints, elements.size()));
  std::vector<T> values;
  for (const JsonReader& element : elements) values.push_back(read(element));
  require_distinct(values, elements);
  return values;
}

std::string gpu_name(const JsonReader& r) {
  const std::string name = r.value().is_string() ? r.value().get<std::string>() : std::string();
  const std::optional<GpuSpec> preset = gpu_preset(name);
  if (!preset) r.fail("expected a GPU preset name (one of: " + join_names(gpu_preset_names()) + ")");
  return preset->name;
}

}  // namespace

std::size_t SweepAxes::point_count() const {
  const auto factor = [](std::size_t size) { return std::max<std::size_t>(1, size); };
  return factor(nodes.size()) * factor(global_batch_size.size()) * factor(seq_length.size()) * factor(gpu.size());
}

std::optional<SweepAxes> parse_sweep_section(const JsonReader& root) {
  const std::optional<JsonReader> r = root.find("sweep");
  if (!r) return std::nullopt;
  r->expect_object();
  r->only_keys({"nodes", "global_batch_size", "seq_length", "gpu"});
  SweepAxes axes;
  if (auto f = r->find("nodes")) {
    const std::optional<JsonReader> groups = root.find("cluster") ? root.required("cluster").find("nodes") : std::nullopt;
    if (groups && groups->value().is_array() && groups->value().size() != 1)
      f->fail_plain(fmt::format("expected a cluster of one node group to sweep its node count, got {} node groups",
                                groups->value().size()));
    axes.nodes = parse_list<int>(*f, [](const JsonReader& e) { return e.positive_int(); });
  }
  if (auto f = r->find("global_batch_size"))
    axes.global_batch_size = parse_list<std::int64_t>(*f, [](const JsonReader& e) { return e.positive_int64(); });
  if (auto f = r->find("seq_length"))
    axes.seq_length = parse_list<std::int64_t>(*f, [](const JsonReader& e) { return e.positive_int64(); });
  if (auto f = r->find("gpu")) axes.gpu = parse_list<std::string>(*f, gpu_name);
  if (axes.nodes.empty() && axes.global_batch_size.empty() && axes.seq_length.empty() && axes.gpu.empty())
    r->fail("expected at least one of nodes, global_batch_size, seq_length, gpu");
  // Each list holds at most kMaxSweepPoints values, so the product of four cannot overflow.
  if (axes.point_count() > kMaxSweepPoints)
    r->fail_plain(fmt::format("expected a sweep of at most {} points, got {} (nodes {} x global_batch_size {} x "
                              "seq_length {} x gpu {}): shorten the lists",
                              kMaxSweepPoints, axes.point_count(), std::max<std::size_t>(1, axes.nodes.size()),
                              std::max<std::size_t>(1, axes.global_batch_size.size()),
                              std::max<std::size_t>(1, axes.seq_length.size()), std::max<std::size_t>(1, axes.gpu.size())));
  return axes;
}

std::vector<SweepPoint> sweep_points(const nlohmann::json& document, const SweepAxes& axes) {
  using json = nlohmann::json;
  json base = document;
  base.erase("sweep");
  std::vector<SweepPoint> points{SweepPoint{"", "", {}, base}};
  // Each list multiplies the points so far by its values: the first list is the outermost.
  const auto expand = [&](const char* field, const json& values, auto set) {
    if (values.empty()) return;
    std::vector<SweepPoint> expanded;
    for (const SweepPoint& point : points)
      for (const json& value : values) {
        SweepPoint next = point;
        next.values.emplace_back(field, value.is_string() ? value.get<std::string>() : value.dump());
        set(next.document, value);
        expanded.push_back(std::move(next));
      }
    points = std::move(expanded);
  };
  expand("nodes", axes.nodes, [](json& d, const json& v) { d["cluster"]["nodes"][0]["count"] = v; });
  expand("global_batch_size", axes.global_batch_size, [](json& d, const json& v) { d["training"]["global_batch_size"] = v; });
  expand("seq_length", axes.seq_length, [](json& d, const json& v) { d["training"]["seq_length"] = v; });
  expand("gpu", axes.gpu, [](json& d, const json& v) {
    for (json& group : d["cluster"]["nodes"]) group["gpu"] = v;
  });
  for (SweepPoint& point : points)
    for (const auto& [field, value] : point.values) {
      point.label += (point.label.empty() ? "" : " ") + field + "=" + value;
      point.folder += (point.folder.empty() ? "" : "_") + field + "-" + value;
    }
  return points;
}

}  // namespace twin
