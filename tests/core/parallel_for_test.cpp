// core/parallel_for.hpp: every index exactly once whatever the thread count, the first failure rethrown
// after all threads end, progress reported up to the total.
#include "core/parallel_for.hpp"

#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace twin {
namespace {

TEST(ParallelFor, EveryIndexOnceIntoItsOwnSlot) {
  for (int jobs : {0, 1, 3, 64}) {
    std::vector<int> slots(1000, 0);
    parallel_for(slots.size(), jobs, [&](std::size_t k) { slots[k] += static_cast<int>(k) * 2 + 1; });
    for (std::size_t k = 0; k < slots.size(); ++k) ASSERT_EQ(slots[k], static_cast<int>(k) * 2 + 1) << jobs;
  }
  parallel_for(0, 4, [](std::size_t) { FAIL() << "no work for an empty range"; });
}

TEST(ParallelFor, TheFirstFailureIsRethrownAfterTheRestRan) {
  std::vector<int> ran(100, 0);
  EXPECT_THROW(parallel_for(ran.size(), 4,
                            [&](std::size_t k) {
                              ran[k] = 1;
                              if (k % 10 == 3) throw std::runtime_error("bad index");
                            }),
               std::runtime_error);
  for (int r : ran) EXPECT_EQ(r, 1);  // one failure does not stop the others
}

TEST(ParallelFor, ProgressEndsAtTheTotal) {
  int last_done = -1, last_total = -1;
  parallel_for(50, 2, [](std::size_t) {}, [&](int done, int total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  });
  EXPECT_EQ(last_done, 50);
  EXPECT_EQ(last_total, 50);
}

}  // namespace
}  // namespace twin
