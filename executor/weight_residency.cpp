// The windows of executor/weight_residency.hpp, found in one walk over the rank class's ops in issue order. Every op
// is attributed to the window open when it is issued: a weight window is the unit's latest gather (any gathered copy
// holds the same weights: nothing changes them within an iteration), a gradient window the writers since the unit's
// last reduction, so the reduction sums exactly the writers before it. Ops of one window on several streams are
// ordered by event waits the walk records (the graph's own edges need not order them: a double-strand pass may read
// a copy gathered for another pass).
#include "executor/weight_residency.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "executor/parameters.hpp"

namespace twin::exec {
namespace {

// The units an action of `touch` names: an experts block's GEMMs their layer's experts unit, a linear its weight's
// holder and its own unit (its bias), anything else its own unit.
std::vector<std::int32_t> units_named(const Op& op, const OpBinding& b, const StageWeights& stage) {
  const std::int32_t unit = op_unit(op, b);
  if (b.action == Action::expert_forward || b.action == Action::expert_input_grad ||
      b.action == Action::expert_weight_grad)
    return {expert_unit_of(unit)};
  if (b.action == Action::linear_forward || b.action == Action::linear_input_grad ||
      b.action == Action::linear_weight_grad || b.action == Action::grad_accumulation) {
    const std::int32_t holder = linear_holder(b.subject, unit, stage.tied_embeddings, stage.table_here).unit;
    if (holder != unit) return {holder, unit};
  }
  return {unit};
}

// A gradient reduction's or a gather's unit: the layer's, or over the expert-data group its experts'.
std::int32_t collective_unit(const Op& op) {
  const bool experts = op.group == GroupKind::expert_data && op.parameter_unit >= 0;
  return experts ? expert_unit_of(op.parameter_unit) : op.parameter_unit;
}

}  // namespace

std::int32_t op_unit(const Op& op, const OpBinding& b) {
  if (op.layer >= 0) return op.layer;
  if (b.subject == OpRole::embedding || op.role == OpRole::embedding) return kEmbeddingUnit;
  return kHeadUnit;
}

LinearHolder linear_holder(OpRole subject, std::int32_t unit, bool tied_embeddings, bool table_here) {
  if (subject != OpRole::output_projection || !tied_embeddings) return {unit, subject, false};
  return table_here ? LinearHolder{kEmbeddingUnit, OpRole::embedding, true}
                    : LinearHolder{kHeadUnit, OpRole::output_projection, true};
}

ParameterAccess parameter_access(const Op& op, const OpBinding& b, const StageWeights& stage) {
  ParameterAccess access;
  if (b.subject == OpRole::core_attention) {  // attention with sinks (op_binding.cpp): it reads them, backward writes
    access.reads_weights = {op_unit(op, b)};  // their gradient too
    if (b.action == Action::attention_backward) access.writes_gradients = access.reads_weights;
    return access;
  }
  switch (action_traits(b.action).parameters) {
    case ParameterTouch::nothing: break;
    case ParameterTouch::reads: access.reads_weights = units_named(op, b, stage); break;
    case ParameterTouch::writes: access.writes_gradients = units_named(op, b, stage); break;
    case ParameterTouch::reads_and_writes: access.reads_weights = access.writes_gradients = units_named(op, b, stage); break;
    case ParameterTouch::gathers: access.gathers = collective_unit(op); break;
    case ParameterTouch::reduces: access.reduces = collective_unit(op); break;
    case ParameterTouch::mla:  // every step reads the layer's weights; a weight-gradient step writes one's gradient
      access.reads_weights = {op_unit(op, b)};
      if (writes_weight_gradient(b.mla_step)) access.writes_gradients = {op_unit(op, b)};
      break;
  }
  return access;
}

namespace {

// The windows while the walk is at an op: each open one's first op (the one that made the buffer), its last op on
// each stream and the streams that waited for its first op already.
class WindowWalk {
 public:
  WindowWalk(const RankClass& rc, std::vector<OpResidency>& ops) : rc_(rc), ops_(ops) {}

  bool is_open(Residency r, std::int32_t unit) const { return open_.count({r, unit}) > 0; }
  void open(Residency r, std::int32_t unit, OpIndex i) {
    ops_[static_cast<std::size_t>(i)].acquire.push_back({r, unit, {}});
    open_[{r, unit}] = Window{i, i, {}, {}};
    ++opened_;
    join(r, unit, i);
  }
  void join(Residency r, std::int32_t unit, OpIndex i) {
    Window& w = open_.at({r, unit});
    const int stream = stream_of(i);
    w.last_on_stream[stream] = i;
    w.last = i;
    if (stream != stream_of(w.first) && w.waited.insert(stream).second) {
      std::vector<OpIndex>& waits = ops_[static_cast<std::size_t>(i)].waits;
      if (std::find(waits.begin(), waits.end(), w.first) == waits.end()) waits.push_back(w.first);
    }
  }
  // Freed after the window's last op, once every other stream's last op of the window is done.
  void close(Residency r, std::int32_t unit) {
    const auto found = open_.find({r, unit});
    const Window& w = found->second;
    ResidencyChange release{r, unit, {}};
    for (const auto& [stream, op] : w.last_on_stream)
      if (stream != stream_of(w.last)) release.after.push_back(op);
    ops_[static_cast<std::size_t>(w.last)].release.push_back(std::move(release));
    open_.erase(found);
  }
  std::vector<std::pair<Residency, std::int32_t>> still_open() const {
    std::vector<std::pair<Residency, std::int32_t>> out;
    for (const auto& [key, w] : open_) out.push_back(key);
    return out;
  }
  OpIndex last_of(Residency r, std::int32_t unit) const { return open_.at({r, unit}).last; }
  int opened() const { return opened_; }

 private:
  struct Window {
    OpIndex first = 0, last = 0;
    std::map<int, OpIndex> last_on_stream;
    std::set<int> waited;
  };
  int stream_of(OpIndex i) const { return static_cast<int>(rc_.op(i).stream); }

  const RankClass& rc_;
  std::vector<OpResidency>& ops_;
  std::map<std::pair<Residency, std::int32_t>, Window> open_;
  int opened_ = 0;
};

// `what` the op does outside every window of `unit` (its buffer then holds this rank's shard only).
std::logic_error outside_windows(const RankClass& rc, OpIndex i, std::int32_t unit, const char* what) {
  return std::logic_error(fmt::format("executor: op {} ({}) {} of parameter unit {}, whose whole buffer exists only "
                                      "between them (ZeRO keeps its shard)",
                                      op_id(rc.index, i), op_name(rc.op(i)), what, unit));
}

}  // namespace

WeightResidency::WeightResidency(const RankClass& rc, const std::vector<OpBinding>& bindings,
                                 const ShardedUnits& units, const StageWeights& stage)
    : ops_(rc.size()) {
  WindowWalk walk(rc, ops_);
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const ParameterAccess a = parameter_access(rc.op(i), bindings[static_cast<std::size_t>(i)], stage);
    if (units.weights.count(a.gathers)) {
      if (walk.is_open(Residency::weights, a.gathers)) walk.close(Residency::weights, a.gathers);
      walk.open(Residency::weights, a.gathers, i);
    }
    for (std::int32_t unit : a.reads_weights) {
      if (!units.weights.count(unit)) continue;
      if (!walk.is_open(Residency::weights, unit))
        throw outside_windows(rc, i, unit, "reads the weights before the first param_gather");
      walk.join(Residency::weights, unit, i);
    }
    for (std::int32_t unit : a.writes_gradients) {
      if (!units.gradients.count(unit)) continue;
      if (walk.is_open(Residency::gradients, unit)) walk.join(Residency::gradients, unit, i);
      else walk.open(Residency::gradients, unit, i);
    }
    if (units.gradients.count(a.reduces)) {  // a reduction with no writer before it reduces zeros
      if (walk.is_open(Residency::gradients, a.reduces)) walk.join(Residency::gradients, a.reduces, i);
      else walk.open(Residency::gradients, a.reduces, i);
      walk.close(Residency::gradients, a.reduces);
    }
  }
  for (const auto& [residency, unit] : walk.still_open()) {
    if (residency == Residency::gradients)
      throw outside_windows(rc, walk.last_of(residency, unit), unit,
                            "writes gradients after the last grad_reduce");
    walk.close(residency, unit);  // the iteration's last reader of the weights
  }
  windows_ = walk.opened();
}

void mark_window_first_gradients(const RankClass& rc, std::vector<OpBinding>& bindings, const ShardedUnits& units,
                                 const StageWeights& stage) {
  // Each weight written so far and the unit that holds it (a linear's holder comes first in writes_gradients: the
  // tied output projection's table is the embedding's, whatever the output layer's own unit reduces).
  std::map<GradientKey, std::int32_t> written;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    OpBinding& b = bindings[static_cast<std::size_t>(i)];
    const ParameterAccess a = parameter_access(rc.op(i), b, stage);
    if (units.gradients.count(a.reduces))  // the unit's weights start again from the next window's fresh buffer
      std::erase_if(written, [&](const auto& entry) { return entry.second == a.reduces; });
    if (a.writes_gradients.empty()) continue;
    const std::int32_t holder = a.writes_gradients.front();
    if (const std::optional<GradientKey> key = gradient_key(rc.op(i), b, stage.tied_embeddings))
      b.first_gradient = (written.emplace(*key, holder).second || b.first_gradient) &&
                         b.action != Action::grad_accumulation;  // an add apart never stores
    if (b.action == Action::embedding_backward)
      b.first_position_gradient =
          written.emplace(GradientKey{rc.op(i).layer, OpRole::none}, holder).second || b.first_position_gradient;
  }
}

}  // namespace twin::exec
