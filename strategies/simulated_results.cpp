#include "strategies/simulated_results.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace twin {
namespace {

using nlohmann::json;

json breakdown_json(const TimeBreakdown& b) {
  return json::array({b.compute_ns, b.exposed_communication_ns, b.bubble_ns, b.optimizer_ns});
}

TimeBreakdown breakdown_from(const json& j) {
  return {j.at(0).get<TimeNs>(), j.at(1).get<TimeNs>(), j.at(2).get<TimeNs>(), j.at(3).get<TimeNs>()};
}

}  // namespace

std::string simulated_results_to_string(const std::vector<Candidate>& candidates,
                                        const std::vector<std::size_t>& indices) {
  json all = json::array();
  for (std::size_t i : indices) {
    const Candidate& c = candidates.at(i);
    json classes = json::array();
    for (const ClassResult& k : c.result.classes)
      classes.push_back({k.finish_ns, breakdown_json(k.breakdown), k.communication_busy_ns});
    json pairings = json::array();
    for (const StrandPairingSummary& p : c.strand_pairings)
      pairings.push_back({p.forward_unit, p.backward_unit, p.blocks, p.paired_blocks, p.serial_ns, p.paired_ns});
    const Throughput& t = c.throughput;
    all.push_back({{"index", i},
                   {"iteration_ns", c.result.iteration_ns},
                   {"critical_class", c.result.critical_class},
                   {"breakdown", breakdown_json(c.result.breakdown)},
                   {"events", c.result.events},
                   {"steady_state",
                    {c.result.steady_state.first_micro_batches, c.result.steady_state.second_micro_batches}},
                   {"classes", classes},
                   {"throughput", {t.iteration_s, t.tokens_per_s, t.mfu, t.hfu}},
                   {"strand_pairings", pairings}});
  }
  return all.dump();
}

void read_simulated_results(const std::string& text, std::vector<Candidate>& candidates) {
  try {
    for (const json& r : json::parse(text)) {
      const auto index = r.at("index").get<std::size_t>();
      if (index >= candidates.size())
        throw std::runtime_error("candidate " + std::to_string(index) + " of " + std::to_string(candidates.size()));
      Candidate& c = candidates[index];
      c.feasible = true;
      c.result = IterationResult{};
      c.result.iteration_ns = r.at("iteration_ns").get<TimeNs>();
      c.result.critical_class = r.at("critical_class").get<int>();
      c.result.breakdown = breakdown_from(r.at("breakdown"));
      c.result.events = r.at("events").get<std::uint64_t>();
      c.result.steady_state = {r.at("steady_state").at(0).get<int>(), r.at("steady_state").at(1).get<int>()};
      for (const json& k : r.at("classes"))
        c.result.classes.push_back({k.at(0).get<TimeNs>(), breakdown_from(k.at(1)), k.at(2).get<TimeNs>(), {}});
      const json& t = r.at("throughput");
      c.throughput = {t.at(0).get<double>(), t.at(1).get<double>(), t.at(2).get<double>(), t.at(3).get<double>()};
      c.strand_pairings.clear();
      for (const json& p : r.at("strand_pairings"))
        c.strand_pairings.push_back({p.at(0).get<std::string>(), p.at(1).get<std::string>(),
                                     p.at(2).get<std::vector<std::string>>(), p.at(3).get<int>(),
                                     p.at(4).get<TimeNs>(), p.at(5).get<TimeNs>()});
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("the search's processes exchanged results twin cannot read: ") + e.what());
  }
}

std::string lower_bounds_to_string(const std::vector<Candidate>& candidates, const std::vector<std::size_t>& indices) {
  json all = json::array();
  for (std::size_t i : indices) all.push_back({i, candidates.at(i).lower_bound_ns});
  return all.dump();
}

void read_lower_bounds(const std::string& text, std::vector<Candidate>& candidates) {
  try {
    for (const json& r : json::parse(text)) {
      const auto index = r.at(0).get<std::size_t>();
      if (index >= candidates.size())
        throw std::runtime_error("candidate " + std::to_string(index) + " of " + std::to_string(candidates.size()));
      candidates[index].lower_bound_ns = r.at(1).get<TimeNs>();
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("the search's processes exchanged bounds twin cannot read: ") + e.what());
  }
}

}  // namespace twin
