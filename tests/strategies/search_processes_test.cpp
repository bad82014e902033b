// A search split over several processes (SearchProcesses) ranks exactly what one process does: here three
// threads stand for three processes, exchanging their shares through an in-memory all-gather.
#include <barrier>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "strategies/families/families.hpp"
#include "strategies/search.hpp"
#include "strategies/simulated_results.hpp"

namespace twin {
namespace {

void expect_same_ranking(const std::vector<Candidate>& a, const std::vector<Candidate>& b, int rank) {
  ASSERT_EQ(a.size(), b.size()) << "rank " << rank;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].key(), b[i].key()) << "rank " << rank << " row " << i;
    EXPECT_EQ(a[i].feasible, b[i].feasible);
    EXPECT_EQ(a[i].result.iteration_ns, b[i].result.iteration_ns) << a[i].key();
    EXPECT_EQ(a[i].result.breakdown.bubble_ns, b[i].result.breakdown.bubble_ns) << a[i].key();
    EXPECT_EQ(a[i].result.events, b[i].result.events) << a[i].key();
    EXPECT_EQ(a[i].result.classes.size(), b[i].result.classes.size()) << a[i].key();
    EXPECT_EQ(a[i].throughput.mfu, b[i].throughput.mfu) << a[i].key();  // the same bits
    EXPECT_EQ(a[i].strand_pairings.size(), b[i].strand_pairings.size()) << a[i].key();
  }
}

TEST(SearchProcesses, ThreeProcessesRankWhatOneDoes) {
  for (const char* name : {"llama2-7b-8xH100", "llama2-13b-8xH100-double-strand"}) {
    SCOPED_TRACE(name);
    const Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/" + name + ".json");
    const Profile profile = load_profile(scenario.profile);
    const std::vector<Candidate> whole = search(scenario, profile, plan_families(), SearchOptions{2, {}});

    constexpr int kProcesses = 3;
    std::vector<std::string> shares(kProcesses);
    std::mutex mutex;
    std::barrier written(kProcesses), read(kProcesses);
    std::vector<std::vector<Candidate>> ranked(kProcesses);
    std::vector<int> exchanged(kProcesses, 0);
    std::vector<std::jthread> processes;
    for (int rank = 0; rank < kProcesses; ++rank)
      processes.emplace_back([&, rank] {
        SearchProcesses p{rank, kProcesses, [&, rank](const std::string& mine) {
                            {
                              std::lock_guard lock(mutex);
                              shares[rank] = mine;
                              ++exchanged[rank];
                            }
                            written.arrive_and_wait();
                            std::vector<std::string> all;
                            {
                              std::lock_guard lock(mutex);
                              all = shares;
                            }
                            read.arrive_and_wait();
                            return all;
                          }};
        ranked[rank] = search(scenario, profile, plan_families(), SearchOptions{1, {}, p});
      });
    processes.clear();  // joins
    for (int rank = 0; rank < kProcesses; ++rank) {
      EXPECT_GE(exchanged[rank], 2);  // the lower bounds, then one or more rounds of simulations
      EXPECT_FALSE(shares[rank].empty());
      expect_same_ranking(whole, ranked[rank], rank);
    }
  }
}

TEST(SearchProcesses, UnreadableSharesAreRefusedNotGuessed) {
  std::vector<Candidate> candidates(2);
  EXPECT_THROW(read_simulated_results("[{\"index\": 5}]", candidates), std::runtime_error);
  EXPECT_THROW(read_simulated_results("not json", candidates), std::runtime_error);
  EXPECT_THROW(read_simulated_results("[{\"index\": 0, \"iteration_ns\": \"x\"}]", candidates), std::runtime_error);
  EXPECT_THROW(read_lower_bounds("[[5, 100]]", candidates), std::runtime_error);
  EXPECT_THROW(read_lower_bounds("[[0, \"x\"]]", candidates), std::runtime_error);
  EXPECT_THROW(read_lower_bounds("not json", candidates), std::runtime_error);
  read_lower_bounds("[[1, 100]]", candidates);
  EXPECT_EQ(candidates[1].lower_bound_ns, 100);
  EXPECT_EQ(candidates[0].lower_bound_ns, 0);
}

}  // namespace
}  // namespace twin
