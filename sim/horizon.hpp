// The end of simulated time, and the one way the engine and its parts add to the clock.
#pragma once
#include "core/units.hpp"

namespace twin::sim {

// Simulated time ends at 1e17 ns (about three years): only an implausibly slow GPU or link gets there, and the
// integer clock must never wrap (at 9.2e18 ns). Throws std::range_error saying so.
inline constexpr TimeNs kHorizonNs = TimeNs{100'000'000} * kNsPerS;
[[noreturn]] void beyond_horizon();

// now + delta, within the horizon (throws std::range_error beyond it).
inline TimeNs later(TimeNs now_ns, TimeNs delta_ns) {
  if (delta_ns > kHorizonNs - now_ns) beyond_horizon();
  return now_ns + delta_ns;
}

}  // namespace twin::sim
