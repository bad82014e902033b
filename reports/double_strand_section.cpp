// Only numbers that were simulated or estimated for this run are printed: the 1F1B comparison appears
// only when that strategy was in the search space and feasible.
#include "reports/double_strand_section.hpp"

#include <fmt/format.h>

#include "reports/format.hpp"

namespace twin {
namespace {

const Candidate* same_with_1f1b(const Candidate& candidate, const std::vector<Candidate>& ranked) {
  Strategy twin_1f1b = candidate.strategy;
  twin_1f1b.schedule = Schedule::one_f_one_b;
  for (const Candidate& other : ranked)
    if (other.feasible && other.strategy == twin_1f1b) return &other;
  return nullptr;
}

}  // namespace

std::string double_strand_section_html(const std::vector<const Candidate*>& top, const std::vector<Candidate>& ranked) {
  const Candidate* chosen = nullptr;
  std::size_t place = 0;
  for (std::size_t k = 0; k < top.size() && !chosen; ++k)
    if (top[k]->strategy.schedule == Schedule::double_strand) chosen = top[k], place = k + 1;
  if (!chosen) return {};

  std::string html = "<section id=\"double-strand\">\n<h2>Double strand: " +
                     escape_html(fmt::format("{} (place {})", chosen->key(), place)) + "</h2>\n";
  const TimeBreakdown& b = chosen->result.breakdown;
  std::string text = fmt::format(
      "The forward of one micro-batch runs beside the backward of another (compute and compute2 streams), a layer "
      "beside its mirror layer, so that each strand's communication overlaps the other's compute. Exposed "
      "communication: {}; iteration {}.",
      seconds_label(b.exposed_communication_ns), seconds_label(chosen->result.iteration_ns));
  if (const Candidate* baseline = same_with_1f1b(*chosen, ranked)) {
    const TimeBreakdown& base = baseline->result.breakdown;
    text += fmt::format(
        " The same strategy with 1F1B exposes {} and takes {}: double strand hides {} of "
        "communication and the iteration is {} shorter.",
        seconds_label(base.exposed_communication_ns), seconds_label(baseline->result.iteration_ns),
        seconds_label(base.exposed_communication_ns - b.exposed_communication_ns),
        seconds_label(baseline->result.iteration_ns - chosen->result.iteration_ns));
  } else {
    text += " The same strategy with 1F1B was not simulated (add \"1f1b\" to the search's schedules to compare).";
  }
  html += "<p>" + escape_html(text) + "</p>\n";
  for (const StrandPairingSummary& pairing : chosen->strand_pairings) {
    if (pairing.forward_unit != pairing.backward_unit) continue;  // embedding and output layer: short, skipped
    html += "<p class=\"note\">" +
            escape_html(fmt::format("{} forward ‖ {} backward: {} of {} blocks co-run; estimated {} ms alone, {} ms "
                                    "paired. Paired segments (forward ‖ backward):",
                                    pairing.forward_unit, pairing.backward_unit, pairing.paired_blocks,
                                    pairing.blocks.size(), milliseconds_text(pairing.serial_ns),
                                    milliseconds_text(pairing.paired_ns))) +
            "</p>\n<ol class=\"note\">\n";
    for (const std::string& block : pairing.blocks)
      if (block.find("–") == std::string::npos) html += "<li><code>" + escape_html(block) + "</code></li>\n";
    html += "</ol>\n";
  }
  return html + "</section>\n";
}

}  // namespace twin
