// Pipeline transfers between rank classes: a send and its recv are one transfer that starts when both
// are ready, and a GPipe schedule built by hand reproduces its textbook time (m+p-1)(t_f+t_b).
#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

// Class 0 computes `sender_work` then sends 1 MB to class 1, which computes `receiver_work` first,
// then receives, then computes once more.
IterationResult two_stage_transfer(const Cluster& cluster, const Profile& profile, int receiver_first_rank,
                                   Bytes sender_work, Bytes receiver_work) {
  IterationGraph graph;
  RankClass& sender = add_class(graph, 0);
  const OpIndex work = sender.add(compute_op(sender_work));
  const OpIndex send = sender.add(pipeline_op(OpKind::send, 1, 42, 1'000'000));
  sender.add_dependency(work, send);
  RankClass& receiver = add_class(graph, receiver_first_rank);
  const OpIndex before = receiver.add(compute_op(receiver_work));
  const OpIndex recv = receiver.add(pipeline_op(OpKind::recv, 0, 42, 1'000'000));
  receiver.add_dependency(before, recv);
  const OpIndex after = receiver.add(compute_op(1'000'000));
  receiver.add_dependency(recv, after);
  return simulate(graph, cluster, profile);
}

TEST(Pipeline, TransferStartsWhenTheLaterSideIsReadyAndEndsOnBothAtOnce) {
  const Cluster cluster = test_cluster(2);
  const Profile profile = test_profile(2.0, 7.0);
  const TimeNs t_after = duration_of(profile, compute_op(1'000'000));
  const TimeNs intra_transfer = 2'000 + 1'000'000 / 100;
  {
    // The sender is later (5 us): the posted recv waits, in the bubble.
    const IterationResult r = two_stage_transfer(cluster, profile, 1, 5'000'000, 1'000);
    const TimeNs t_sender = duration_of(profile, compute_op(5'000'000));
    const auto& send = r.classes[0].op_timings[1];
    const auto& recv = r.classes[1].op_timings[1];
    EXPECT_EQ(send.start_ns, t_sender);
    EXPECT_EQ(recv.start_ns, t_sender);
    EXPECT_EQ(send.end_ns, t_sender + intra_transfer);
    EXPECT_EQ(recv.end_ns, send.end_ns);
    EXPECT_EQ(r.classes[1].finish_ns, t_sender + intra_transfer + t_after);
    EXPECT_EQ(r.classes[1].breakdown.exposed_communication_ns, intra_transfer);
    EXPECT_EQ(r.classes[1].breakdown.total_ns(), r.classes[1].finish_ns);
  }
  {
    // The receiver is later (8 us): the send waits for it.
    const IterationResult r = two_stage_transfer(cluster, profile, 1, 1'000, 8'000'000);
    const TimeNs t_receiver = duration_of(profile, compute_op(8'000'000));
    EXPECT_EQ(r.classes[0].op_timings[1].start_ns, t_receiver);
    EXPECT_EQ(r.classes[0].finish_ns, t_receiver + intra_transfer);
    EXPECT_EQ(r.classes[1].op_timings[1].end_ns, t_receiver + intra_transfer);
    EXPECT_EQ(r.iteration_ns, t_receiver + intra_transfer + t_after);
    EXPECT_EQ(r.critical_class, 1);
  }
  {
    // Classes on different nodes: the inter link (50 GB/s per GPU) and its latency.
    const IterationResult r = two_stage_transfer(cluster, profile, kGpusPerNode, 5'000'000, 1'000);
    const TimeNs t_sender = duration_of(profile, compute_op(5'000'000));
    EXPECT_EQ(r.classes[1].op_timings[1].end_ns,
              t_sender + 7'000 + static_cast<TimeNs>(1'000'000 / inter_GBps(cluster)));
  }
}

TEST(Pipeline, SendAndRecvOfAStageUseOppositeDirectionsOfTheLink) {
  // Stage 0 sends to stage 1 while stage 1 sends to stage 0: full duplex, so neither slows the other.
  const Cluster cluster = test_cluster(1);
  const Profile profile = test_profile();
  IterationGraph graph;
  for (int c = 0; c < 2; ++c) {
    RankClass& rank_class = add_class(graph, c);
    rank_class.add(pipeline_op(OpKind::send, 1 - c, c, 1'000'000));
    rank_class.add(pipeline_op(OpKind::recv, 1 - c, 1 - c, 1'000'000));
  }
  const IterationResult r = simulate(graph, cluster, profile);
  EXPECT_EQ(r.iteration_ns, 1'000'000 / 100);
}

// p stages, m micro-batches, GPipe: all forwards then all backwards, activations and gradients passed
// by free (zero-byte) transfers.
IterationGraph gpipe(int p, int m, const Op& forward, const Op& backward) {
  IterationGraph graph;
  for (int s = 0; s < p; ++s) {
    RankClass& stage = add_class(graph, s * kGpusPerNode);
    for (int j = 0; j < m; ++j) {
      const OpIndex f = stage.add(forward);
      if (s > 0) stage.add_dependency(stage.add(pipeline_op(OpKind::recv, s - 1, j, 0)), f);
      if (s < p - 1) stage.add_dependency(f, stage.add(pipeline_op(OpKind::send, s + 1, j, 0)));
    }
    for (int j = 0; j < m; ++j) {
      const OpIndex b = stage.add(backward);
      if (s < p - 1) stage.add_dependency(stage.add(pipeline_op(OpKind::recv, s + 1, m + j, 0)), b);
      if (s > 0) stage.add_dependency(b, stage.add(pipeline_op(OpKind::send, s - 1, m + j, 0)));
    }
  }
  return graph;
}

TEST(Pipeline, GPipeTakesMPlusPMinusOneStepsOfForwardAndBackward) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(8);
  const Op forward = compute_op(1'000'000), backward = compute_op(2'000'000);
  const TimeNs t_f = duration_of(profile, forward), t_b = duration_of(profile, backward);
  for (auto [p, m] : {std::pair{4, 6}, std::pair{2, 1}, std::pair{8, 16}}) {
    const IterationResult r = simulate(gpipe(p, m, forward, backward), cluster, profile);
    EXPECT_EQ(r.iteration_ns, (m + p - 1) * (t_f + t_b)) << p << "x" << m;
    EXPECT_EQ(r.critical_class, 0);
    EXPECT_EQ(r.breakdown.compute_ns, m * (t_f + t_b));
    EXPECT_EQ(r.breakdown.bubble_ns, (p - 1) * (t_f + t_b));
    EXPECT_EQ(r.breakdown.exposed_communication_ns, 0);
    // The last stage finishes its backwards first: (m+p-1) forwards' time, then its m backwards.
    EXPECT_EQ(r.classes[p - 1].finish_ns, (m + p - 1) * t_f + m * t_b);
  }
}

TEST(Pipeline, TwoStagesWithPricedTransfers) {
  // F0, send activation, F1, B1, send gradient, B0: every step on the critical path.
  const Profile profile = test_profile(3.0, 0);
  const Cluster cluster = test_cluster(1);
  const Op forward = compute_op(1'000'000), backward = compute_op(2'000'000);
  IterationGraph graph;
  for (int s = 0; s < 2; ++s) add_class(graph, s);
  RankClass& first = graph.classes[0];
  RankClass& second = graph.classes[1];
  const OpIndex f0 = first.add(forward);
  first.add_dependency(f0, first.add(pipeline_op(OpKind::send, 1, 0, 500'000)));
  const OpIndex g0 = first.add(pipeline_op(OpKind::recv, 1, 1, 500'000));
  first.add_dependency(g0, first.add(backward));
  const OpIndex a1 = second.add(pipeline_op(OpKind::recv, 0, 0, 500'000));
  const OpIndex f1 = second.add(forward);
  second.add_dependency(a1, f1);
  const OpIndex b1 = second.add(backward);
  second.add_dependency(b1, second.add(pipeline_op(OpKind::send, 0, 1, 500'000)));
  const TimeNs t_f = duration_of(profile, forward), t_b = duration_of(profile, backward);
  const TimeNs transfer = 3'000 + 500'000 / 100;
  EXPECT_EQ(simulate(graph, cluster, profile).iteration_ns, 2 * t_f + 2 * t_b + 2 * transfer);
}

}  // namespace
}  // namespace twin::test
