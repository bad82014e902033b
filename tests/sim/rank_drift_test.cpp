// Ranks that drift apart (sim/rank_drift.hpp): E[max of n normals] against its closed forms, the expected
// lateness, and the engine delaying a collective the compute waits on (which aligns its group) and one on a side
// stream (which does not).
#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "sim/rank_drift.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

using sim::expected_max_of_normals;

TEST(RankDrift, ExpectedMaxOfNormalsMatchesItsClosedForms) {
  EXPECT_EQ(expected_max_of_normals(1), 0);
  EXPECT_NEAR(expected_max_of_normals(2), 1 / std::sqrt(std::numbers::pi), 1e-7);
  EXPECT_NEAR(expected_max_of_normals(3), 1.5 / std::sqrt(std::numbers::pi), 1e-7);
  EXPECT_NEAR(expected_max_of_normals(4), 1.0293753730, 1e-7);
  EXPECT_NEAR(expected_max_of_normals(5), 1.1629644736, 1e-7);
  EXPECT_NEAR(expected_max_of_normals(10), 1.5387527308, 1e-7);
  EXPECT_NEAR(expected_max_of_normals(100), 2.5075937037, 1e-6);  // Harter's (1961) tables
}

TEST(RankDrift, LatenessIsTheLastOfNTimesTheSpreadAfterTheCompute) {
  const RankDrift drift{1000, 0.01, "test"};
  const double e4 = expected_max_of_normals(4);
  EXPECT_EQ(sim::expected_lateness_ns(drift, e4, 0), static_cast<TimeNs>(std::ceil(e4 * 1000)));
  EXPECT_EQ(sim::expected_lateness_ns(drift, e4, 2'000'000), static_cast<TimeNs>(std::ceil(e4 * 21000)));
}

// compute A -> collective X over 4 data ranks -> (compute B when X aligns, else B after A) -> collective Y.
IterationResult run(const Profile& profile, bool compute_waits_on_x) {
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::data, 4, 4, 1);
  const OpIndex a = rank_class.add(compute_op(3'000'000));
  const OpIndex x = rank_class.add(collective_op(OpKind::all_reduce, GroupKind::data, 4, 1'000'000, Stream::dp_comm));
  const OpIndex b = rank_class.add(compute_op(5'000'000));
  const OpIndex y = rank_class.add(collective_op(OpKind::all_reduce, GroupKind::data, 4, 1'000'000, Stream::dp_comm));
  rank_class.add_dependency(a, x);
  rank_class.add_dependency(compute_waits_on_x ? x : a, b);
  rank_class.add_dependency(b, y);
  return simulate(graph, test_cluster(1), profile);
}

TimeNs duration(const IterationResult& result, int op) {
  return result.classes[0].op_timings[op].end_ns - result.classes[0].op_timings[op].start_ns;
}

TEST(RankDrift, ACollectiveTheComputeWaitsOnAlignsItsGroupAndOneBesideItDoesNot) {
  Profile profile = test_profile();
  const Op a = compute_op(3'000'000), b = compute_op(5'000'000);
  const TimeNs a_ns = duration_of(profile, a), b_ns = duration_of(profile, b);
  const double e4 = expected_max_of_normals(4);
  for (bool aligning : {true, false}) {
    profile.gpus[0].rank_drift = {};
    const IterationResult alone = run(profile, aligning);
    profile.gpus[0].rank_drift = {0, 0.01, "test"};
    const IterationResult drifting = run(profile, aligning);
    // X waits for the last rank after A's compute either way.
    EXPECT_EQ(duration(drifting, 1) - duration(alone, 1), std::ceil(e4 * 0.01 * a_ns)) << aligning;
    // Y: after B only when X aligned the group, else after A and B.
    const TimeNs drift_ns = aligning ? b_ns : a_ns + b_ns;
    EXPECT_EQ(duration(drifting, 3) - duration(alone, 3), std::ceil(e4 * 0.01 * drift_ns)) << aligning;
    EXPECT_GT(drifting.iteration_ns, alone.iteration_ns);
  }
}

TEST(RankDrift, AGroupOfOneRankWaitsForNoOne) {
  Profile profile = test_profile();
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  const OpIndex a = rank_class.add(compute_op(3'000'000));
  const OpIndex x = rank_class.add(collective_op(OpKind::all_reduce, GroupKind::data, 1, 1'000'000, Stream::dp_comm));
  rank_class.add_dependency(a, x);
  const TimeNs alone_ns = simulate(graph, test_cluster(1), profile).iteration_ns;
  profile.gpus[0].rank_drift = {1000, 0.01, "test"};
  EXPECT_EQ(simulate(graph, test_cluster(1), profile).iteration_ns, alone_ns);
}

}  // namespace
}  // namespace twin::test
