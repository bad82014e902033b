// Hot switching's search (HotSPa): bucket boundaries and a strategy per bucket, chosen by a small dynamic
// program over the candidate boundaries from the simulated time of every (bucket, strategy) phase and the
// simulated time of every switch; the best plans and every static strategy that fits the longest sequence
// (all sequences packed to it, the baseline) are then simulated whole in the engine and become candidates.
#pragma once
#include <functional>
#include <limits>
#include <vector>

#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "strategies/search.hpp"

namespace twin {

inline constexpr double kNoPhase = std::numeric_limits<double>::infinity();

// What the boundary choice needs, over positions 0..ends (position 0 is length 0, position k the k-th
// candidate boundary) and strategies 0..strategies-1; phase (a, c] covers the lengths between positions a
// and c. Each function returns kNoPhase (or false) where the choice is impossible.
struct BoundaryCosts {
  int ends = 0;
  int strategies = 0;
  std::function<double(int a, int c, int s)> phase_ns;                // without the optimizer step
  std::function<bool(int a, int c, int s, int home)> fits;             // memory, optimizer states in home's layout
  std::function<double(int from, int to, bool gradients)> switch_ns;
  std::function<double(int home)> optimizer_ns;
};

struct BoundaryChoice {
  std::vector<int> ends;        // positions where phases end, increasing, the last is `ends`
  std::vector<int> strategies;  // per phase; the last is home
  double estimate_ns = kNoPhase;
};

// The fastest plan of at least two phases whose home (last phase) runs strategy `home`, or an empty choice.
// Phases run shortest first; the switches are home -> first (weights), then weights and gradients.
BoundaryChoice choose_boundaries(const BoundaryCosts& costs, int home);

// About how many ops the search simulates: every phase (a range of lengths between two candidate boundaries, each
// strategy) is lowered and simulated whole, each counted as strategies/validity.hpp counts a graph. Beyond
// kMaxHotSwitchSearchOps, check_hot_switch_search_size throws InputError at /search/hot_switch with the estimate and
// how to narrow it, before anything is simulated (search_hot_switch calls it first).
inline constexpr double kMaxHotSwitchSearchOps = 40e6;  // about 40 s on the 2-core development machine (docs/PERFORMANCE.md)
double hot_switch_search_ops(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                             const std::vector<std::int64_t>& boundaries, const std::vector<Strategy>& strategies);
void check_hot_switch_search_size(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                                  const std::vector<std::int64_t>& boundaries, const std::vector<Strategy>& strategies);

// The family's candidates (family "hot-switch"): one static plan per strategy that fits the longest
// sequence, and up to `plans` hot-switching plans (the best per home strategy, fastest estimate first).
std::vector<Candidate> search_hot_switch(const Scenario& scenario, const Profile& profile, int jobs, int plans = 3);

// The family's search (a FamilySearch): a pinned hot-switching plan (strategy.hot_switch) alone, simulated where
// it fits; else search_hot_switch when the scenario asks for hot switching (search.hot_switch) and pins no strategy
// or other family plan; else nothing.
std::vector<Candidate> hot_switch_family_candidates(const Scenario& scenario, const Profile& profile, int jobs);

}  // namespace twin
