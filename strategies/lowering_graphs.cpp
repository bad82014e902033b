// The lowering's entry points: every stage's rank class lowered into one IterationGraph, or the classes one after
// another into the same op storage, which each thread keeps for its next such lowering (lower_class_by_class).
#include <string>
#include <utility>
#include <vector>

#include "strategies/lowering_stage.hpp"
#include "strategies/rank_layout.hpp"

namespace twin {

namespace {

// Ops one stage will hold, to reserve storage once: passes x layers x ops per layer, generously rounded.
std::size_t estimated_ops(const lowering::RankShapes& s, std::size_t passes) {
  const std::size_t per_layer = 60 + 8 * static_cast<std::size_t>(s.cp) + (s.recompute == Recompute::full ? 30 : 0);
  return passes * (static_cast<std::size_t>(s.layers_per_chunk) * per_layer / 2 + 16) + 16;
}

// The op storage of the class this thread lowered last, emptied, its capacity kept: a fresh page is a page fault
// when first written, and storage written moments ago is still in cache. (Storage, not a graph: Boost's edges
// point at their graph's edge list.)
struct OpStorage {
  decltype(std::declval<OpGraph&>().m_vertices) vertices;
  decltype(std::declval<OpGraph&>().m_edges) edges;
  std::vector<RepeatedOps> repeats;
};
thread_local OpStorage spare_storage;

// `rc` (empty) takes over this thread's spare storage.
void take_spare_storage(RankClass& rc) {
  rc.graph.m_vertices = std::move(spare_storage.vertices);
  rc.graph.m_edges = std::move(spare_storage.edges);
  rc.repeats = std::move(spare_storage.repeats);
}

// Empties `rc` into this thread's spare storage (its repeats, which name its ops, go with them).
void keep_storage(RankClass& rc) {
  rc.graph.m_vertices.clear();  // the ops and their edge lists go; the capacity stays
  rc.graph.m_edges.clear();
  rc.repeats.clear();
  spare_storage.vertices = std::move(rc.graph.m_vertices);
  spare_storage.edges = std::move(rc.graph.m_edges);
  spare_storage.repeats = std::move(rc.repeats);
}

// What every class of a strategy's lowering shares: its shapes and each stage's schedule.
struct StageSchedules {
  StageSchedules(const Scenario& scenario, const Strategy& strategy)
      : shapes(lowering::rank_shapes(scenario, strategy)),
        double_strand(strategy.schedule == Schedule::double_strand),
        orders(pipeline_schedule(strategy.schedule, shapes.pp, strategy.num_micro_batches, shapes.vpp,
                                 runs_combined_1f1b(scenario.framework, strategy))),
        strand_orders(double_strand ? double_strand_schedule(shapes.pp, strategy.num_micro_batches)
                                    : std::vector<std::vector<StrandStep>>{}) {}
  const lowering::RankShapes shapes;
  const bool double_strand;
  const std::vector<std::vector<ScheduleStep>> orders;
  const std::vector<std::vector<StrandStep>> strand_orders;
};

// Places stage `stage`'s class on the cluster and lowers its ops into `rc` (empty).
void lower_stage(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                 const StageSchedules& schedules, int stage, RankClass& rc,
                 std::vector<StrandPairingSummary>* pairings) {
  const lowering::RankShapes& shapes = schedules.shapes;
  rc.index = stage;
  rc.pipeline = 0;
  rc.stage = stage;
  rc.num_ranks = shapes.tp * shapes.cp * strategy.data_parallel_size;
  rc.first_rank = global_rank(strategy, 0, 0, 0, stage);
  // On a mixed cluster a stage whose ranks span GPU kinds runs at its slowest kind's pace.
  rc.node_group = slowest_node_group_of_ranks(scenario.cluster, rc.first_rank, rc.num_ranks);
  rc.spans = group_spans(strategy, scenario.cluster, stage);
  rc.label = "stage " + std::to_string(stage);
  rc.graph.m_vertices.reserve(estimated_ops(shapes, schedules.orders[stage].size()));
  lowering::StageLowering lowering(scenario, strategy, shapes, rc, &profile);
  if (schedules.double_strand)
    lowering.run_double_strand(stage, schedules.strand_orders[stage], stage == 0 ? pairings : nullptr);
  else
    lowering.run(stage, schedules.orders[stage]);
}

}  // namespace

IterationGraph lower_to_op_graphs(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                  std::vector<StrandPairingSummary>* pairings) {
  const StageSchedules schedules(scenario, strategy);
  IterationGraph graph;
  graph.classes.resize(static_cast<std::size_t>(schedules.shapes.pp));
  for (int stage = 0; stage < schedules.shapes.pp; ++stage) {
    lower_stage(scenario, strategy, profile, schedules, stage, graph.classes[stage], pairings);
  }
  return graph;
}

IterationGraph lower_to_op_graphs(const Scenario& scenario, const Strategy& strategy) {
  if (strategy.schedule != Schedule::double_strand || scenario.profile.empty() || scenario.profile == "builtin")
    return lower_to_op_graphs(scenario, strategy, builtin_profile());
  return lower_to_op_graphs(scenario, strategy, load_profile(scenario.profile));
}

void lower_class_by_class(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                          std::vector<StrandPairingSummary>* pairings, const ClassVisitor& visit) {
  const StageSchedules schedules(scenario, strategy);
  IterationGraph graph;
  graph.classes.resize(static_cast<std::size_t>(schedules.shapes.pp));
  for (int stage = 0; stage < schedules.shapes.pp; ++stage) {
    RankClass& rc = graph.classes[stage];
    take_spare_storage(rc);
    lower_stage(scenario, strategy, profile, schedules, stage, rc, pairings);
    visit(graph, stage);
    keep_storage(rc);  // the next class is lowered over it, still in cache
  }
}

}  // namespace twin
