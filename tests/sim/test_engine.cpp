// The engine's semantics on hand-built graphs with exact closed forms: stream order, overlap across
// streams, overlap slowdown, fluid link sharing, breakdown, deadlock and determinism.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

TEST(Engine, SerialStreamIsTheSumOfDurations) {
  const Profile profile = test_profile();
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  const Op a = compute_op(1'000'000), b = compute_op(2'000'000), c = compute_op(3'000'000);
  rank_class.add(a);
  rank_class.add(b);
  rank_class.add(c);
  const TimeNs ta = duration_of(profile, a), tb = duration_of(profile, b), tc = duration_of(profile, c);
  ASSERT_GT(ta, 0);

  const IterationResult result = simulate(graph, test_cluster(1), profile);
  EXPECT_EQ(result.iteration_ns, ta + tb + tc);
  const auto& timings = result.classes[0].op_timings;
  ASSERT_EQ(timings.size(), 3u);
  EXPECT_EQ(timings[1].start_ns, ta);
  EXPECT_EQ(timings[1].end_ns, ta + tb);
  EXPECT_EQ(timings[2].start_ns, ta + tb);
  EXPECT_EQ(result.breakdown.compute_ns, ta + tb + tc);
}

TEST(Engine, TwoStreamsOverlapUnlessAnEdgeOrdersThem) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(1);
  // A context send of 1 MB on the 100 GB/s intra link takes 10 us; the compute op 3 us.
  const Op compute = compute_op(3'000'000);
  const TimeNs t_compute = duration_of(profile, compute);
  const TimeNs t_send = 1'000'000 / static_cast<TimeNs>(kIntraGBps);
  for (bool ordered : {false, true}) {
    IterationGraph graph;
    RankClass& rank_class = add_class(graph, 0);
    set_span(rank_class, GroupKind::context, 2, 2, 1);
    const OpIndex first = rank_class.add(compute);
    const OpIndex second = rank_class.add(ring_send_op(1'000'000));
    if (ordered) rank_class.add_dependency(first, second);
    const IterationResult result = simulate(graph, cluster, profile);
    EXPECT_EQ(result.iteration_ns, ordered ? t_compute + t_send : std::max(t_compute, t_send)) << ordered;
  }
}

TEST(Engine, OverlapSlowsComputeAndCommunicationByTheProfileFactors) {
  Profile profile = test_profile();
  profile.overlap = {1.5, 2.0};
  const Cluster cluster = test_cluster(1);
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::context, 2, 2, 1);
  const Op compute = compute_op(1'000'000);
  rank_class.add(compute);
  rank_class.add(ring_send_op(1'000'000));  // 10 us alone at 100 GB/s
  const TimeNs t_compute = duration_of(profile, compute);
  ASSERT_EQ(t_compute % 2, 0);

  const IterationResult result = simulate(graph, cluster, profile);
  const auto& timings = result.classes[0].op_timings;
  // Compute runs the whole time under communication: 1.5x.
  const TimeNs compute_end = t_compute * 3 / 2;
  EXPECT_EQ(timings[0].end_ns, compute_end);
  // The send moves at half rate while compute runs, then at full rate.
  const double bytes_during_compute = compute_end * kIntraGBps / 2.0;
  const TimeNs expected_send_end = compute_end + static_cast<TimeNs>((1'000'000 - bytes_during_compute) / kIntraGBps);
  EXPECT_EQ(timings[1].end_ns, expected_send_end);
  EXPECT_EQ(result.iteration_ns, expected_send_end);
}

TEST(Engine, UserbuffersSlowComputeByTheirSmsAndCopyEnginesNotAtAll) {
  Profile profile = test_profile();
  profile.overlap = {1.5, 2.0};  // NCCL's factors: neither applies to userbuffers
  const Cluster cluster = test_cluster(1);
  const auto run = [&](CommKernel kernel) {
    IterationGraph graph;
    RankClass& rank_class = add_class(graph, 0);
    set_span(rank_class, GroupKind::context, 2, 2, 1);
    rank_class.add(compute_op(1'000'000));
    Op send = ring_send_op(10'000'000);  // 100 us alone: outlasts the compute
    send.comm_kernel = kernel;
    rank_class.add(send);
    return simulate(graph, cluster, profile).classes[0].op_timings;
  };
  const TimeNs t_compute = duration_of(profile, compute_op(1'000'000));
  // Copy engines: the GEMM keeps every SM, and the copy runs at the link's rate.
  const auto copy = run(CommKernel::userbuffers_copy_engine);
  EXPECT_EQ(copy[0].end_ns, t_compute);
  EXPECT_EQ(copy[1].end_ns, 100'000);
  // A userbuffers kernel on 16 of the test GPU's 100 SMs: compute runs on 84 of them; the kernel's own
  // SMs keep the transfer at the link's rate.
  const auto on_sms = run(CommKernel::userbuffers_sm);
  EXPECT_NEAR(double(on_sms[0].end_ns), t_compute * 100.0 / 84.0, 1.0);
  EXPECT_EQ(on_sms[1].end_ns, 100'000);
}

TEST(Engine, ConcurrentFlowsOnOneLinkShareItEqually) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(1);
  {
    IterationGraph graph;
    RankClass& rank_class = add_class(graph, 0);
    set_span(rank_class, GroupKind::context, 2, 2, 1);
    rank_class.add(ring_send_op(1'000'000, Stream::cp_comm));
    rank_class.add(ring_send_op(1'000'000, Stream::dp_comm));
    const IterationResult result = simulate(graph, cluster, profile);
    EXPECT_EQ(result.classes[0].op_timings[0].end_ns, 20'000);  // each alone: 10 us
    EXPECT_EQ(result.classes[0].op_timings[1].end_ns, 20'000);
  }
  {
    // Unequal flows: the small one ends at 2x its alone time, then the big one speeds up again.
    IterationGraph graph;
    RankClass& rank_class = add_class(graph, 0);
    set_span(rank_class, GroupKind::context, 2, 2, 1);
    rank_class.add(ring_send_op(1'000'000, Stream::cp_comm));
    rank_class.add(ring_send_op(500'000, Stream::dp_comm));
    const IterationResult result = simulate(graph, cluster, profile);
    EXPECT_EQ(result.classes[0].op_timings[1].end_ns, 10'000);
    EXPECT_EQ(result.classes[0].op_timings[0].end_ns, 15'000);
  }
}

TEST(Engine, FlowsOfDifferentLinksDoNotShare) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(2);
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::context, 2, 2, 1);   // intra
  set_span(rank_class, GroupKind::data, 2, 1, 2);      // inter
  rank_class.add(ring_send_op(1'000'000, Stream::cp_comm));
  rank_class.add(collective_op(OpKind::all_gather, GroupKind::data, 2, 2'000'000, Stream::dp_comm));
  const IterationResult result = simulate(graph, cluster, profile);
  EXPECT_EQ(result.classes[0].op_timings[0].end_ns, 10'000);
  // all_gather of S over 2 ranks: S/2 on the inter link, NCCL's ring latency before it.
  EXPECT_NEAR(result.classes[0].op_timings[1].end_ns,
              nccl_ring_alone_ns(OpKind::all_gather, {2, 1, 2}, 2'000'000, inter_GBps(cluster)), 1.0);
}

TEST(Engine, BreakdownSplitsTimeAndAddsUpToTheFinish) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(1);
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::context, 2, 2, 1);
  set_span(rank_class, GroupKind::data, 8, 8, 1);
  const Op forward = compute_op(2'000'000);
  const OpIndex f = rank_class.add(forward);
  const OpIndex overlapped = rank_class.add(ring_send_op(1'000'000));  // 10 us, 2 us of it hidden
  const OpIndex exposed = rank_class.add(ring_send_op(500'000));       // 5 us, after the first
  rank_class.add_dependency(overlapped, exposed);
  Op grad_sync = collective_op(OpKind::all_reduce, GroupKind::data, 8, 800'000, Stream::dp_comm);
  grad_sync.phase = Phase::optimizer;  // 2*7/8*0.8 MB / 100 GB/s = 14 us, after NCCL's latency
  const TimeNs t_sync = std::llround(nccl_ring_alone_ns(OpKind::all_reduce, {8, 8, 1}, 800'000, kIntraGBps));
  const OpIndex sync = rank_class.add(grad_sync);
  rank_class.add_dependency(exposed, sync);
  const Op step = compute_op(3'000'000, Phase::optimizer);
  const OpIndex s = rank_class.add(step);
  rank_class.add_dependency(sync, s);
  rank_class.add_dependency(f, s);
  const TimeNs t_forward = duration_of(profile, forward), t_step = duration_of(profile, step);
  ASSERT_LT(t_forward, 10'000);

  const IterationResult result = simulate(graph, cluster, profile);
  const TimeBreakdown& b = result.breakdown;
  EXPECT_EQ(b.compute_ns, t_forward);
  EXPECT_EQ(b.exposed_communication_ns, 15'000 - t_forward);
  EXPECT_NEAR(b.optimizer_ns, t_sync + t_step, 1);
  EXPECT_EQ(b.bubble_ns, 0);
  EXPECT_EQ(b.total_ns(), result.iteration_ns);
  EXPECT_NEAR(result.iteration_ns, 15'000 + t_sync + t_step, 1);
  EXPECT_NEAR(result.classes[0].communication_busy_ns, 15'000 + t_sync, 1);
}

TEST(Engine, EmptyAndTrivialCollectivesTakeNoTime) {
  const Profile profile = test_profile();
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  OpIndex previous = rank_class.add(collective_op(OpKind::all_reduce, GroupKind::tensor, 1, 1 << 20, Stream::tp_comm));
  for (int i = 0; i < 20'000; ++i) {  // a long chain of zero-time ops must not recurse
    const OpIndex next = rank_class.add(collective_op(OpKind::all_reduce, GroupKind::tensor, 1, 1 << 20, Stream::tp_comm));
    rank_class.add_dependency(previous, next);
    previous = next;
  }
  const IterationResult result = simulate(graph, test_cluster(1), profile);
  EXPECT_EQ(result.iteration_ns, 0);
  EXPECT_GT(result.events, 20'000u);
}

TEST(Engine, DeadlockNamesAStuckOpOfEachClass) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(1);
  {
    // The first op waits for the second, which stream order puts after it.
    IterationGraph graph;
    RankClass& rank_class = add_class(graph, 0);
    const OpIndex a = rank_class.add(compute_op(1000));
    const OpIndex b = rank_class.add(compute_op(1000));
    rank_class.add_dependency(b, a);
    try {
      simulate(graph, cluster, profile);
      FAIL() << "expected a deadlock";
    } catch (const std::logic_error& error) {
      EXPECT_NE(std::string(error.what()).find(op_id(0, 0)), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find(op_name(rank_class.op(0))), std::string::npos) << error.what();
    }
  }
  {
    // Two stages that each wait to receive before sending to the other.
    IterationGraph graph;
    for (int c = 0; c < 2; ++c) {
      RankClass& rank_class = add_class(graph, c);
      const OpIndex recv = rank_class.add(pipeline_op(OpKind::recv, 1 - c, 1 - c, 1000));
      const OpIndex send = rank_class.add(pipeline_op(OpKind::send, 1 - c, c, 1000));
      rank_class.add_dependency(recv, send);
    }
    try {
      simulate(graph, cluster, profile);
      FAIL() << "expected a deadlock";
    } catch (const std::logic_error& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find(op_id(0, 0)), std::string::npos) << what;
      EXPECT_NE(what.find(op_id(1, 0)), std::string::npos) << what;
    }
  }
}

TEST(Engine, LoweringBugsAreLogicErrors) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(1);
  IterationGraph unmatched;
  add_class(unmatched, 0).add(pipeline_op(OpKind::send, 0, 7, 1000));
  EXPECT_THROW(simulate(unmatched, cluster, profile), std::logic_error);

  IterationGraph wrong_span;
  RankClass& rank_class = add_class(wrong_span, 0);
  set_span(rank_class, GroupKind::tensor, 4, 4, 1);
  rank_class.add(collective_op(OpKind::all_reduce, GroupKind::tensor, 8, 1000, Stream::tp_comm));
  EXPECT_THROW(simulate(wrong_span, cluster, profile), std::logic_error);
}

// A two-stage pipeline with TP all-reduces, CP sends, p2p and an optimizer, under every non-ideal
// setting at once: two runs must agree in every field.
TEST(Engine, SameInputsGiveIdenticalResults) {
  Profile profile = test_profile(1.5, 5.0);
  profile.overlap = {1.1, 1.05};
  profile.intra_node.bandwidth = {0.8, 1 << 20};
  profile.inter_node.bandwidth = {0.9, 1 << 19};
  const Cluster cluster = test_cluster(4);
  IterationGraph graph;
  for (int c = 0; c < 2; ++c) {
    RankClass& rank_class = add_class(graph, 16 * c);
    set_span(rank_class, GroupKind::tensor, 4, 4, 1);
    set_span(rank_class, GroupKind::context, 2, 2, 1);
    set_span(rank_class, GroupKind::data, 4, 2, 2);
    OpIndex previous = 0;
    for (int mb = 0; mb < 8; ++mb) {
      OpIndex recv = 0;
      if (c == 1) recv = rank_class.add(pipeline_op(OpKind::recv, 0, mb, 3 << 20));
      const OpIndex gemm = rank_class.add(compute_op((1 + mb % 3) * 700'001));
      if (c == 1) rank_class.add_dependency(recv, gemm);
      if (mb > 0) rank_class.add_dependency(previous, gemm);
      const OpIndex reduce = rank_class.add(collective_op(OpKind::all_reduce, GroupKind::tensor, 4, 1 << 21, Stream::tp_comm));
      rank_class.add_dependency(gemm, reduce);
      rank_class.add(ring_send_op(777'777));
      previous = rank_class.add(compute_op(333'333));
      rank_class.add_dependency(reduce, previous);
      if (c == 0) {
        const OpIndex send = rank_class.add(pipeline_op(OpKind::send, 1, mb, 3 << 20));
        rank_class.add_dependency(previous, send);
      }
    }
    const OpIndex sync = rank_class.add(collective_op(OpKind::reduce_scatter, GroupKind::data, 4, 50 << 20, Stream::dp_comm));
    rank_class.add_dependency(previous, sync);
    Op step = compute_op(5'000'000, Phase::optimizer);
    rank_class.add_dependency(sync, rank_class.add(step));
  }
  const IterationResult first = simulate(graph, cluster, profile);
  const IterationResult second = simulate(graph, cluster, profile);
  EXPECT_GT(first.iteration_ns, 0);
  EXPECT_EQ(first.iteration_ns, second.iteration_ns);
  EXPECT_EQ(first.critical_class, second.critical_class);
  EXPECT_EQ(first.events, second.events);
  ASSERT_EQ(first.classes.size(), second.classes.size());
  for (std::size_t c = 0; c < first.classes.size(); ++c) {
    const ClassResult &a = first.classes[c], &b = second.classes[c];
    EXPECT_EQ(a.finish_ns, b.finish_ns);
    EXPECT_EQ(a.communication_busy_ns, b.communication_busy_ns);
    EXPECT_EQ(a.breakdown.compute_ns, b.breakdown.compute_ns);
    EXPECT_EQ(a.breakdown.exposed_communication_ns, b.breakdown.exposed_communication_ns);
    EXPECT_EQ(a.breakdown.bubble_ns, b.breakdown.bubble_ns);
    EXPECT_EQ(a.breakdown.optimizer_ns, b.breakdown.optimizer_ns);
    EXPECT_EQ(a.breakdown.total_ns(), a.finish_ns);
    ASSERT_EQ(a.op_timings.size(), b.op_timings.size());
    for (std::size_t i = 0; i < a.op_timings.size(); ++i) {
      EXPECT_EQ(a.op_timings[i].start_ns, b.op_timings[i].start_ns) << i;
      EXPECT_EQ(a.op_timings[i].end_ns, b.op_timings[i].end_ns) << i;
    }
  }
}

}  // namespace
}  // namespace twin::test
