// Internal to flattening (flat_graph.cpp, compute_busy.cpp): what an op costs alone. Compute ops are priced by
// shape through a cache (price_key: sim/price_cache.hpp); collectives and point-to-point transfers get a plan
// made once per distinct (kind, bytes, span) of a class: from the profile's measured table when it has one, else
// tuned and scaled by the profile's fitted correction.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "cost/profile.hpp"
#include "core/op_graph.hpp"
#include "sim/flat_graph.hpp"
#include "sim/price_cache.hpp"

namespace twin::sim {

// "c<class>.<index> (<op name>)", as errors name an op (without the name where `graph` no longer holds it).
std::string describe(const IterationGraph& graph, int rank_class, OpIndex index);

// Lowering repeats a handful of shapes across layers and micro-batches, so ops that would be priced
// alike share one call to compute_time_ns; a search's simulations also share a PriceCache.
class ComputeTimes {
 public:
  // With `shared`, the memo is this thread's for `gpu` in `shared`, kept from one class and candidate to the next.
  // `step_clock`: the clocks the class's step holds (sim/step_clock.hpp; 0: the profile's own).
  ComputeTimes(const Profile& profile, const GpuSpec& gpu, PriceCache* shared, StepClock step_clock = {})
      : profile_(profile), gpu_(gpu), shared_(shared), step_clock_(step_clock),
        memo_(shared ? shared->memo_of_this_thread({&gpu, step_clock}) : own_memo_.emplace()) {}
  TimeNs operator()(const Op& op) {  // inline: every flattened compute op asks
    const PriceKey key = price_key(op);
    const std::size_t hash = PriceKeyHash{}(key);
    if (const TimeNs* known = memo_.find(key, hash)) return *known;
    const auto price = [&] { return compute_time_ns(profile_, gpu_, op, step_clock_); };
    const TimeNs ns = shared_ ? shared_->get_or_compute({&gpu_, step_clock_}, key, price) : price();
    memo_.insert(key, hash, ns);
    return ns;
  }

 private:
  const Profile& profile_;
  const GpuSpec& gpu_;
  PriceCache* shared_;
  StepClock step_clock_;
  std::optional<PriceMemo> own_memo_;  // without a shared cache
  PriceMemo& memo_;
};

// An op named in errors: (graph, class, index).
struct OpRef {
  const IterationGraph& graph;
  int rank_class;
  OpIndex index;
  std::string describe() const { return twin::sim::describe(graph, rank_class, index); }
};

// Throws std::invalid_argument naming `op` when the plan crosses a link `links` lack: a zero bandwidth would
// stall the flow forever.
void require_links(const CollectivePlan& plan, const LinkParams& links, const OpRef& op);

// A class's communication plans, each made once, appended to `flat`'s plans.
class PlanTable {
 public:
  // `gpu`: the class's GPUs, whose measured tables (if the profile has any) replace the algorithm models.
  PlanTable(FlatClass& flat, const Profile& profile, const GpuSpec& gpu) : flat_(flat), profile_(profile), gpu_(gpu) {}
  std::uint32_t collective(const Op& op, const GroupSpan& span, const OpRef& what);
  std::uint32_t point_to_point(Bytes bytes, LinkKind link, const OpRef& what);

 private:
  // kind, bytes, span, the flex dispatcher's routing, an all-to-all's blocks per peer
  using Key = std::tuple<int, Bytes, int, int, int, int, int>;
  template <class MakePlan>
  std::uint32_t find_or_add(const Key& key, MakePlan make_plan, const OpRef& what);
  FlatClass& flat_;
  const Profile& profile_;
  const GpuSpec& gpu_;
  std::map<Key, std::uint32_t> index_;
};

// The plan of collective or ring send i of class c, as the engine runs it (a ring step on the link its group
// crosses; a collective on its group's span). Throws std::logic_error for a collective without a group or whose
// group size matches no span of the class.
std::uint32_t communication_plan(const IterationGraph& graph, int c, OpIndex i, PlanTable& plans);

}  // namespace twin::sim
