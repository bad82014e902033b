// The validation table: strict reading (JsonReader: file, JSON path, expectation), and the conversion of
// each published figure into an iteration time with the FLOP formula its source used.
#include "validation/published_table.hpp"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace twin {

namespace {

constexpr int kTableVersion = 1;

double head_dim(const ModelConfig& m) {
  return m.kv_channels > 0 ? static_cast<double>(m.kv_channels)
                           : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

FlopsFormula formula_from(const JsonReader& r) {
  const std::string name = r.one_of({"narayanan2021", "korthikanti2022", "megatron2024", "palm"}, "FLOP formula");
  if (name == "narayanan2021") return FlopsFormula::narayanan2021;
  if (name == "korthikanti2022") return FlopsFormula::korthikanti2022;
  if (name == "megatron2024") return FlopsFormula::megatron2024;
  return FlopsFormula::palm;
}

PublishedFigure read_figure(const JsonReader& r) {
  r.only_keys({"metric", "value", "flops_formula", "peak_tflops", "parameters"});
  PublishedFigure f;
  f.metric = r.required("metric").one_of({"iteration_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"}, "metric");
  f.value = f.metric == "mfu" ? r.required("value").number(1e-6, 1.0, "expected an MFU in (0, 1]")
                              : r.required("value").positive_number();
  const bool needs_flops = f.metric == "tflops_per_gpu" || f.metric == "mfu";
  if (auto formula = r.find("flops_formula")) {
    if (!needs_flops) formula->fail("no FLOP formula for a metric that is not TFLOP/s or MFU");
    f.formula = formula_from(*formula);
  } else if (needs_flops) {
    r.required("flops_formula");
  }
  if (f.metric == "mfu") f.peak_tflops = r.required("peak_tflops").positive_number();
  if (f.formula == FlopsFormula::palm) f.parameters = r.required("parameters").positive_number();
  return f;
}

std::string optional_string(const JsonReader& r, std::string_view key) {
  if (auto f = r.find(key)) {
    if (!f->value().is_string()) f->fail("expected a string");
    return f->value().get<std::string>();
  }
  return "";
}

}  // namespace

double published_flops_per_iteration(FlopsFormula formula, const Scenario& s, double parameters) {
  const ModelConfig& m = s.model;
  const double B = static_cast<double>(s.training.global_batch_size), seq = static_cast<double>(s.training.seq_length);
  const double l = m.num_layers, h = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  const double a = m.num_attention_heads, g = m.num_query_groups, d = head_dim(m);
  switch (formula) {
    case FlopsFormula::none: return 0;
    case FlopsFormula::narayanan2021: return 96 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (16 * l * h));
    case FlopsFormula::korthikanti2022: return 72 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (12 * l * h));
    case FlopsFormula::megatron2024: {
      const double gated = m.activation == Activation::swiglu ? 1.5 : 1.0;
      const double experts = m.is_moe() ? m.moe.top_k : 1.0;
      const double ffn = static_cast<double>(m.is_moe() ? m.moe.ffn_hidden_size : m.ffn_hidden_size);
      return 12 * B * seq * l * h * h *
             ((1 + g / a + seq / h) * (a * d / h) + ffn / h * experts * gated + V / (2 * l * h));
    }
    case FlopsFormula::palm: return B * seq * (6 * parameters + 12 * l * a * d * seq);
  }
  return 0;
}

double published_iteration_time(const PublishedFigure& f, const Scenario& s, int gpus) {
  const double tokens = static_cast<double>(s.training.global_batch_size) * static_cast<double>(s.training.seq_length);
  if (f.metric == "iteration_time_s") return f.value;
  if (f.metric == "tokens_per_s_per_gpu") return tokens / (f.value * gpus);
  const double flops = published_flops_per_iteration(f.formula, s, f.parameters);
  if (f.metric == "tflops_per_gpu") return flops / (f.value * 1e12 * gpus);
  return flops / (f.value * f.peak_tflops * 1e12 * gpus);  // mfu
}

PublishedTable parse_published_table(const nlohmann::json& document, const std::string& source) {
  const JsonReader root(document, source);
  root.expect_object();
  root.only_keys({"format", "version", "about", "rows"});
  if (root.required("format").value() != "twin-validation") root.required("format").fail("expected \"twin-validation\"");
  if (root.required("version").value() != kTableVersion)
    root.required("version").fail(fmt::format("expected table format version {}", kTableVersion));
  PublishedTable table;
  table.source = source;
  std::set<std::string> ids;
  for (const JsonReader& r : root.required("rows").non_empty_elements()) {
    r.only_keys({"id", "group", "source", "confidence", "notes", "unknowns", "published", "scenario"});
    PublishedRow row;
    row.json_path = r.path();
    row.id = r.required("id").string();
    if (!ids.insert(row.id).second) r.required("id").fail("a unique row id");
    row.group = r.required("group").string();
    const JsonReader from = r.required("source");
    from.only_keys({"reference", "table", "url", "quote"});
    row.reference = from.required("reference").string();
    row.table = optional_string(from, "table");
    row.url = optional_string(from, "url");
    row.confidence = r.required("confidence").one_of({"high", "medium", "low"}, "confidence");
    row.unknowns = optional_string(r, "unknowns");
    optional_string(r, "notes");
    row.published = read_figure(r.required("published"));
    const JsonReader scenario = r.required("scenario");
    scenario.expect_object();
    row.scenario = parse_scenario(scenario.value(), source, scenario.path());
    row.published_iteration_s =
        published_iteration_time(row.published, row.scenario, row.scenario.cluster.total_gpus());
    if (!(row.published_iteration_s > 0) || !std::isfinite(row.published_iteration_s))
      r.required("published").fail("a figure that gives a positive, finite iteration time");
    table.rows.push_back(std::move(row));
  }
  return table;
}

PublishedTable load_published_table(const std::filesystem::path& path) {
  return parse_published_table(read_json_file(path.string(), "a readable validation table JSON"), path.string());
}

}  // namespace twin
