// The processes of one `twin simulate` that mpirun or srun started (their variables: core/launch_environment.hpp):
// MPI joins them, each simulates its share of the search, and MPI_Allgatherv hands every share to all
// (strategies/search.hpp, SearchProcesses). Rank 0 writes the outputs; the others only simulate.
#pragma once
#include <string>

#include "strategies/search.hpp"

namespace twin {

class SearchProcessGroup {
 public:
  // One process unless mpirun or srun says there are several; then MPI is initialised (and a build without
  // MPI throws std::runtime_error saying so).
  SearchProcessGroup();
  ~SearchProcessGroup();  // MPI_Finalize, where it was initialised
  SearchProcessGroup(const SearchProcessGroup&) = delete;
  SearchProcessGroup& operator=(const SearchProcessGroup&) = delete;

  SearchProcesses processes() const;
  bool writes_outputs() const { return rank_ == 0; }
  int count() const { return count_; }
  // With several processes: logs `what` as this rank's failure and stops every process (MPI_Abort), since the
  // others would wait for its results forever. With one, returns.
  void stop_all_on_failure(const std::string& what) const;

 private:
  int rank_ = 0;
  int count_ = 1;
  bool initialised_ = false;
};

}  // namespace twin
