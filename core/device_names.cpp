// Substring rules, most specific first: "H200" before "H100" (no device name holds both), "A800" before
// "A100", and "3080 Ti" kept apart from the plain 3080, which has no preset.
#include "core/device_names.hpp"

namespace twin {

std::optional<std::string> gpu_preset_for_device_name(std::string_view name, double memory_GiB) {
  auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  if (has("H200")) return "H200-141GB";
  if (has("H100")) return "H100-SXM-80GB";
  if (has("A800")) return "A800-80GB";
  if (has("A100")) {
    if (has("80GB") || memory_GiB > 50) return "A100-SXM-80GB";
    if (has("40GB") || (memory_GiB > 0 && memory_GiB <= 50)) return "A100-SXM-40GB";
    return std::nullopt;
  }
  if (has("4090")) return "RTX-4090";
  if (has("3090")) return "RTX-3090";
  if (has("3080 Ti")) return "RTX-3080Ti";
  return std::nullopt;
}

}  // namespace twin
