// Op names and ids, and the well-formedness checks: cycles, unmatched or duplicated pipeline transfers.
#include <gtest/gtest.h>

#include "core/op_graph.hpp"

namespace twin {
namespace {

Op p2p(OpKind kind, int peer, std::int64_t tag, GroupKind group = GroupKind::pipeline) {
  Op op;
  op.kind = kind;
  op.role = OpRole::pipeline_activation;
  op.stream = kind == OpKind::send ? Stream::pp_send : Stream::pp_recv;
  op.group = group;
  op.peer = peer;
  op.p2p_tag = tag;
  op.bytes = 1024;
  return op;
}

IterationGraph two_stages() {
  IterationGraph g;
  g.classes.resize(2);
  for (int i = 0; i < 2; ++i) {
    g.classes[i].index = i;
    g.classes[i].stage = i;
    g.classes[i].label = "stage " + std::to_string(i);
  }
  Op gemm;
  gemm.kind = OpKind::gemm;
  const OpIndex a = g.classes[0].add(gemm);
  const OpIndex send = g.classes[0].add(p2p(OpKind::send, 1, 7));
  g.classes[0].add_dependency(a, send);
  const OpIndex recv = g.classes[1].add(p2p(OpKind::recv, 0, 7));
  const OpIndex b = g.classes[1].add(gemm);
  g.classes[1].add_dependency(recv, b);
  return g;
}

TEST(OpNames, ReadLikeTheModel) {
  Op op;
  op.kind = OpKind::gemm;
  op.role = OpRole::fc1;
  op.layer = 3;
  EXPECT_EQ(op_name(op), "L3.fc1.fwd");
  op.phase = Phase::backward;
  op.micro_batch = 2;
  EXPECT_EQ(op_name(op), "L3.fc1.bwd.mb2");
  op.recomputed = true;
  EXPECT_EQ(op_name(op), "L3.fc1.recompute.mb2");
  EXPECT_EQ(op_name(p2p(OpKind::send, 1, 0)), "pipeline_activation.send");
  Op optimizer;
  optimizer.kind = OpKind::optimizer_step;
  optimizer.phase = Phase::optimizer;
  EXPECT_EQ(op_name(optimizer), "optimizer_step.opt");
  EXPECT_EQ(to_string(Stream::tp_comm), "tp");
  EXPECT_EQ(to_string(GroupKind::expert_data), "expert_data");
  EXPECT_EQ(to_string(OpKind::reduce_scatter), "reduce_scatter");
  EXPECT_EQ(to_string(Phase::backward), "backward");
  EXPECT_EQ(op_id(2, 17), "c2.17");
}

TEST(RankClass, LastOnAStreamIsTheLastOpAddedThereOrNone) {
  RankClass rank_class;
  EXPECT_EQ(rank_class.last_on(Stream::compute), kNoOpIndex);
  Op compute, reduce;
  reduce.kind = OpKind::all_reduce;
  reduce.stream = Stream::tp_comm;
  const OpIndex first = rank_class.add(compute);
  const OpIndex collective = rank_class.add(reduce);
  EXPECT_EQ(rank_class.last_on(Stream::compute), first);
  EXPECT_EQ(rank_class.last_on(Stream::tp_comm), collective);
  const OpIndex second = rank_class.add(compute);
  EXPECT_EQ(rank_class.last_on(Stream::compute), second);
  EXPECT_EQ(rank_class.last_on(Stream::tp_comm), collective);
  EXPECT_EQ(rank_class.last_on(Stream::dp_comm), kNoOpIndex);
  const RankClass copy = rank_class;  // a copy keeps it
  EXPECT_EQ(copy.last_on(Stream::compute), second);
}

TEST(OpGraphCheck, MatchedTransfersPass) {
  const IterationGraph g = two_stages();
  EXPECT_NO_THROW(check_well_formed(g));
  EXPECT_EQ(g.total_ops(), 4u);
}

TEST(OpGraphCheck, CycleIsALoweringBug) {
  IterationGraph g = two_stages();
  g.classes[1].add_dependency(1, 0);  // recv -> gemm -> recv
  try {
    check_well_formed(g);
    FAIL() << "expected a cycle error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stage 1"), std::string::npos) << e.what();
  }
}

TEST(OpGraphCheck, UnmatchedSendFails) {
  IterationGraph g = two_stages();
  g.classes[0].add(p2p(OpKind::send, 1, 8));
  EXPECT_THROW(check_well_formed(g), std::logic_error);
}

TEST(OpGraphCheck, RecvOnTheWrongPeerFails) {
  IterationGraph g = two_stages();
  g.classes[1].graph[0].peer = 1;  // recv names itself as sender
  EXPECT_THROW(check_well_formed(g), std::logic_error);
}

TEST(OpGraphCheck, DuplicatedRecvFails) {
  IterationGraph g = two_stages();
  g.classes[1].add(p2p(OpKind::recv, 0, 7));
  EXPECT_THROW(check_well_formed(g), std::logic_error);
}

TEST(OpGraphCheck, SendAsRecvKindMismatchFails) {
  IterationGraph g = two_stages();
  g.classes[1].graph[0].kind = OpKind::send;  // both sides send
  EXPECT_THROW(check_well_formed(g), std::logic_error);
}

TEST(OpGraphCheck, ContextSendsStandAlone) {
  IterationGraph g = two_stages();
  Op ring = p2p(OpKind::send, -1, 99, GroupKind::context);
  ring.transfer = Transfer::context_ring;  // a ring step says so (Op::transfer)
  g.classes[0].add(ring);
  EXPECT_NO_THROW(check_well_formed(g));
}

TEST(OpGraphCheck, UnknownPeerFails) {
  IterationGraph g = two_stages();
  g.classes[0].add(p2p(OpKind::send, 5, 3));
  EXPECT_THROW(check_well_formed(g), std::logic_error);
}

}  // namespace
}  // namespace twin
