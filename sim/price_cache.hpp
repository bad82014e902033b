// Compute-op prices shared by the simulations of one search: every candidate is priced by the same profile on
// the same cluster, and candidates repeat each other's op shapes, so each distinct (GPU, op shape) is priced
// once per search instead of once per candidate. Thread-safe. A price is the value of one pure function
// (compute_time_ns) whoever asks first, so results do not depend on the order or the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/op.hpp"
#include "core/units.hpp"
#include "cost/sustained_clock.hpp"

namespace twin::sim {

// Every field of an op that can affect its price; fields that only place an op (stream, layer, micro-batch,
// chunk, group, peer, tag) or say what it does for the executor (a GEMM's pass, the linear and tensor a TP
// collective serves: priced by shape alike) are left out. The enums, flags and 32-bit counts share words (19
// instead of 31): every flattened compute op's key is built, hashed and compared.
using PriceKey = std::array<std::int64_t, 19>;
PriceKey price_key(const Op& op);
// For hash maps of prices: every flattening looks up each compute op's key (a search, millions of times).
struct PriceKeyHash {
  std::size_t operator()(const PriceKey& key) const;
};
struct PriceKeyEqual {
  // Every word compared, without a branch or a call (memcmp was one per lookup): inline for the memo below.
  bool operator()(const PriceKey& a, const PriceKey& b) const {
    std::uint64_t differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differ |= static_cast<std::uint64_t>(a[i] ^ b[i]);
    return differ == 0;
  }
};

// Prices by key for one thread (a flattening's class): open addressing in a power-of-two table, each slot with its
// key's hash, where std::unordered_map took the hash modulo a prime and followed a node pointer for every op.
class PriceMemo {
 public:
  PriceMemo() : slots_(kFirstSlots) {}
  // The price stored for `key`, whose PriceKeyHash is `hash`; nullptr when none is.
  const TimeNs* find(const PriceKey& key, std::size_t hash) const {
    const std::uint64_t tag = tag_of(hash);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = tag & mask;; i = (i + 1) & mask) {  // a key's slot is at or after its tag's
      const Slot& slot = slots_[i];
      if (slot.tag == 0) return nullptr;
      if (slot.tag == tag && PriceKeyEqual{}(slot.key, key)) return &slot.price;
    }
  }
  // Stores a price for a key not stored yet.
  void insert(const PriceKey& key, std::size_t hash, TimeNs price);

 private:
  static constexpr std::size_t kFirstSlots = 64;
  static std::uint64_t tag_of(std::size_t hash) { return static_cast<std::uint64_t>(hash) | 1; }  // 0: empty
  struct Slot {
    std::uint64_t tag = 0;
    TimeNs price = 0;
    PriceKey key{};
  };
  void place(const Slot& slot);
  std::vector<Slot> slots_;  // at most half full
  std::size_t used_ = 0;
};

// The GPU prices are for (a GPU of the cluster every user of the cache simulates) and the SM clocks its step holds
// (sim/step_clock.hpp; 0: the profile's own): candidates whose steps differ in GEMM duty price GEMMs apart.
struct PricedOn {
  const GpuSpec* gpu = nullptr;
  StepClock step_clock;
  auto operator<=>(const PricedOn&) const = default;
  bool operator==(const PricedOn&) const = default;
};

class PriceCache {
 public:
  // The price of an op of `key` on `on`, computing it with `compute` the first time.
  TimeNs get_or_compute(const PricedOn& on, const PriceKey& key, const std::function<TimeNs()>& compute);
  // The calling thread's memo of the prices on `on` it has had from this cache, for as long as the cache lives:
  // each flattened class would otherwise start an empty memo and ask the cache (a lock and a node-based map)
  // for every shape it repeats (a search: hundreds of thousands of times). Only the calling thread may use it.
  PriceMemo& memo_of_this_thread(const PricedOn& on);

 private:
  std::mutex mutex_;
  std::map<std::pair<std::thread::id, PricedOn>, std::unique_ptr<PriceMemo>> memos_;
  struct GpuPriceKeyHash {
    std::size_t operator()(const std::pair<PricedOn, PriceKey>& key) const;
  };
  std::unordered_map<std::pair<PricedOn, PriceKey>, TimeNs, GpuPriceKeyHash> prices_;
};

}  // namespace twin::sim
