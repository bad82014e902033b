// Compute-op prices shared by the simulations of one search: every candidate is priced by the same profile on
// the same cluster, and candidates repeat each other's op shapes, so each distinct (GPU, op shape) is priced
// once per search instead of once per candidate. Thread-safe. A price is the value of one pure function
// (compute_time_ns) whoever asks first, so results do not depend on the order or the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <mutex>
#include <utility>

#include "core/cluster.hpp"
#include "core/op.hpp"
#include "core/units.hpp"

namespace twin::sim {

// Every field of an op that can affect its price; fields that only place an op (stream, layer, micro-batch,
// chunk, group, peer, tag) or say what it does for the executor (a GEMM's pass, the linear and tensor a TP
// collective serves: priced by shape alike) are left out. The enums, flags and 32-bit counts share words (17
// instead of 30): every flattened compute op's key is built, hashed and compared.
using PriceKey = std::array<std::int64_t, 17>;
PriceKey price_key(const Op& op);
// For hash maps of prices: every flattening looks up each compute op's key (a search, millions of times).
struct PriceKeyHash {
  std::size_t operator()(const PriceKey& key) const;
};
struct PriceKeyEqual {
  bool operator()(const PriceKey& a, const PriceKey& b) const;
};

class PriceCache {
 public:
  // The price of an op of `key` on `gpu` (a GPU of the cluster every user of this cache simulates), computing
  // it with `compute` the first time.
  TimeNs get_or_compute(const GpuSpec& gpu, const PriceKey& key, const std::function<TimeNs()>& compute);

 private:
  std::mutex mutex_;
  struct GpuPriceKeyHash {
    std::size_t operator()(const std::pair<const GpuSpec*, PriceKey>& key) const;
  };
  std::unordered_map<std::pair<const GpuSpec*, PriceKey>, TimeNs, GpuPriceKeyHash> prices_;
};

}  // namespace twin::sim
