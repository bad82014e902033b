#include "traces/gpu_clocks.hpp"

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "cost/measurement_stats.hpp"

namespace twin {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A finite number, or nullopt for nvidia-smi's "[N/A]" / "[Not Supported]".
std::optional<double> field_value(std::string_view field, bool& malformed) {
  field = trimmed(field);
  if (field.starts_with("[")) return std::nullopt;
  double value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error != std::errc() || end != field.data() + field.size() || !(value >= 0 && value < 1e7)) malformed = true;
  return value;
}

}  // namespace

std::optional<GpuClockSummary> read_gpu_clocks(const std::filesystem::path& path) {
  const std::string text = read_input_file(path, "gpu_clocks.csv (index, clocks.sm, power.draw, utilization.gpu)",
                                           kMaxRunFileBytes);
  std::vector<double> clocks, powers;
  std::size_t begin = 0;
  for (int line = 1; begin < text.size(); ++line) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // cut short: the sampler was stopped while writing it
    const std::string_view row(text.data() + begin, end - begin);
    begin = end + 1;
    if (trimmed(row).empty()) continue;
    std::vector<std::string_view> fields;
    for (std::size_t from = 0;;) {
      const std::size_t comma = row.find(',', from);
      fields.push_back(row.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
    bool malformed = fields.size() != 4;
    std::optional<double> clock, power, utilization;
    if (!malformed) {
      field_value(fields[0], malformed);
      clock = field_value(fields[1], malformed);
      power = field_value(fields[2], malformed);
      utilization = field_value(fields[3], malformed);
    }
    if (malformed)
      throw InputError(path.string(), "",
                       fmt::format("at line {}: 4 numbers (index, SM clock in MHz, power in W, utilisation in %)", line));
    if (!clock || !power || !utilization || *utilization < kBusyUtilizationPercent || *clock <= 0) continue;
    clocks.push_back(*clock);
    powers.push_back(*power);
  }
  if (clocks.empty()) return std::nullopt;
  const int busy = static_cast<int>(clocks.size());
  return GpuClockSummary{percentile(std::move(clocks), 0.5), percentile(std::move(powers), 0.5), busy};
}

}  // namespace twin
