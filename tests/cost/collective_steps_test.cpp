// Steps and bus factors of every collective: the bus factor is bit for bit nccl-tests' formula (calibrated
// profiles and the simulator's outputs depend on the last bit), and the ring's steps times S/n.
#include <gtest/gtest.h>

#include <stdexcept>

#include "cost/collective_steps.hpp"

namespace twin {
namespace {

TEST(CollectiveSteps, BusFactorIsNcclTestsFormulaBitForBit) {
  for (int ranks = 1; ranks <= 4096; ++ranks) {
    const double n = ranks;
    EXPECT_EQ(busbw_factor(OpKind::all_reduce, ranks), 2.0 * (n - 1) / n) << ranks;
    for (OpKind kind : {OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_to_all})
      EXPECT_EQ(busbw_factor(kind, ranks), (n - 1) / n) << to_string(kind) << " " << ranks;
    EXPECT_EQ(busbw_factor(OpKind::send, ranks), 1.0);
    EXPECT_EQ(busbw_factor(OpKind::recv, ranks), 1.0);
  }
}

TEST(CollectiveSteps, RingStepsEachMoveOneNthOfTheBuffer) {
  for (int ranks : {2, 3, 8, 64}) {
    EXPECT_EQ(algorithm_steps(OpKind::all_reduce, ranks), 2 * (ranks - 1));
    EXPECT_EQ(algorithm_steps(OpKind::reduce_scatter, ranks), ranks - 1);
    for (OpKind kind : {OpKind::all_reduce, OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_to_all})
      EXPECT_DOUBLE_EQ(busbw_factor(kind, ranks), algorithm_steps(kind, ranks) / static_cast<double>(ranks));
    EXPECT_EQ(algorithm_steps(OpKind::send, ranks), 1);
  }
  EXPECT_THROW(algorithm_steps(OpKind::gemm, 2), std::invalid_argument);
  EXPECT_THROW(busbw_factor(OpKind::optimizer_step, 2), std::invalid_argument);
}

}  // namespace
}  // namespace twin
