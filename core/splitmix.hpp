// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): the one hash of
// 64-bit words the CPU side keys its synthetic data, routing draws and dropout seeds with.
#pragma once
#include <cstdint>

namespace twin {

inline constexpr std::uint64_t kSplitMixIncrement = 0x9E3779B97F4A7C15ull;

// The generator's output for state x: (x + increment) through its finaliser, a bijection that spreads every bit.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += kSplitMixIncrement;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace twin
