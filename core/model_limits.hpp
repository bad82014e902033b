// Upper bounds on a model's sizes, wherever a model is read (scenario JSON, Hugging Face config.json): they
// keep every derived count (parameters, FLOPs, bytes) far inside 64-bit integers.
#pragma once
#include <cstdint>

namespace twin {

inline constexpr std::int64_t kMaxLayers = 4096;
inline constexpr std::int64_t kMaxHidden = 1 << 18;
inline constexpr std::int64_t kMaxFfn = 1 << 20;
inline constexpr std::int64_t kMaxHeads = 1 << 16;
inline constexpr std::int64_t kMaxKvChannels = 1 << 12;
inline constexpr std::int64_t kMaxVocab = 1 << 22;
inline constexpr std::int64_t kMaxSequence = 1 << 24;
inline constexpr std::int64_t kMaxExperts = 1024;
inline constexpr std::int64_t kMaxRotaryBase = 1'000'000'000'000;  // RoPE's theta: Llama 3's is 5e5
// Group-limited routing's groups that twin execute's router holds for a token (one register each,
// gpu/kernels/moe.cu); a scenario may state up to kMaxExperts.
inline constexpr int kMaxExecutedRouterGroups = 32;

}  // namespace twin
