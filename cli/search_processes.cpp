#include "cli/search_processes.hpp"

#include <numeric>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#ifdef TWIN_WITH_MPI
#include <mpi.h>
#endif

#include "core/error_line.hpp"
#include "core/launch_environment.hpp"

namespace twin {
namespace {

#ifdef TWIN_WITH_MPI
void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw std::runtime_error(fmt::format("{} failed: {}", call, std::string(text, length)));
}
#define TWIN_MPI_CHECK(call) check_mpi((call), #call)

std::vector<std::string> all_gather(const std::string& mine, int count) {
  const int bytes = static_cast<int>(mine.size());
  std::vector<int> sizes(count), offsets(count);
  TWIN_MPI_CHECK(MPI_Allgather(&bytes, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::exclusive_scan(sizes.begin(), sizes.end(), offsets.begin(), 0);
  std::string all(static_cast<std::size_t>(offsets.back() + sizes.back()), '\0');
  TWIN_MPI_CHECK(MPI_Allgatherv(mine.data(), bytes, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR,
                                MPI_COMM_WORLD));
  std::vector<std::string> shares;
  for (int r = 0; r < count; ++r) shares.push_back(all.substr(offsets[r], sizes[r]));
  return shares;
}
#endif

}  // namespace

SearchProcessGroup::SearchProcessGroup() {
  const std::optional<RankIdentity> identity = rank_from_environment(process_environment());
  if (!identity || identity->world_size == 1 || (identity->launcher != "mpirun" && identity->launcher != "srun"))
    return;
#ifdef TWIN_WITH_MPI
  TWIN_MPI_CHECK(MPI_Init(nullptr, nullptr));
  initialised_ = true;
  TWIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  TWIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &count_));
  if (rank_ == 0) spdlog::info("search split over {} processes ({})", count_, identity->launcher);
#else
  throw std::runtime_error(fmt::format(
      "{} started {} processes, but this twin was built without MPI (install libopenmpi-dev and rebuild): each "
      "would run the whole search and write the same outputs",
      identity->launcher, identity->world_size));
#endif
}

SearchProcessGroup::~SearchProcessGroup() {
#ifdef TWIN_WITH_MPI
  if (initialised_) MPI_Finalize();
#endif
}

SearchProcesses SearchProcessGroup::processes() const {
  SearchProcesses p;
  p.rank = rank_;
  p.count = count_;
#ifdef TWIN_WITH_MPI
  if (count_ > 1) p.all_gather = [count = count_](const std::string& mine) { return all_gather(mine, count); };
#endif
  return p;
}

void SearchProcessGroup::stop_all_on_failure(const std::string& what) const {
  if (count_ == 1) return;
  spdlog::error("process {} of {}: {}", rank_, count_, printable_line(what));
#ifdef TWIN_WITH_MPI
  MPI_Abort(MPI_COMM_WORLD, 1);
#endif
}

}  // namespace twin
