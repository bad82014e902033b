// Every row of the op-kind table (core/op_kinds.hpp) is priced as it says: compute kinds get a positive
// kernel time from the built-in profile, communication kinds are refused by the kernel model (the collective
// model prices them), and the kind names are the ones traces and kernel keys use.
#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/op_kinds.hpp"
#include "cost/profile.hpp"

namespace twin {
namespace {

// A small op of `kind` with every field its pricing reads.
Op sample_op(OpKind kind) {
  Op op;
  op.kind = kind;
  op.gemm = {1024, 1024, 1024};
  op.attention = {1, 8, 8, 1024, 1024, 128, true};
  op.rows = 1024;
  op.cols = 1024;
  op.elements = 1 << 20;
  op.bytes = 1 << 22;
  op.flops = 2.0 * 1024 * 1024 * 1024;
  op.group_size = 2;
  return op;
}

TEST(OpKindTable, NamesEveryKindOnce) {
  std::set<std::string> names;
  for (OpKind kind : all_op_kinds()) {
    EXPECT_EQ(to_string(kind), op_kind_traits(kind).name);
    EXPECT_TRUE(names.insert(to_string(kind)).second) << to_string(kind);
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kOpKindCount));
  EXPECT_EQ(static_cast<int>(kLastOpKind), kOpKindCount - 1);
}

TEST(OpKindTable, EveryComputeKindHasAKernelPriceAndCommunicationHasNone) {
  const Profile profile = builtin_profile();
  const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  for (OpKind kind : all_op_kinds()) {
    const Op op = sample_op(kind);
    const OpPricing pricing = op_kind_traits(kind).pricing;
    const bool communication = pricing == OpPricing::collective || pricing == OpPricing::point_to_point;
    EXPECT_EQ(communication, op.is_communication()) << to_string(kind);
    if (communication) {
      EXPECT_THROW(compute_time_ns(profile, gpu, op), std::logic_error) << to_string(kind);
    } else {
      EXPECT_GT(compute_time_ns(profile, gpu, op), 0) << to_string(kind);
    }
  }
}

}  // namespace
}  // namespace twin
