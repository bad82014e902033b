// How `twin simulate` shows that a search is alive: a progress line while the uniform strategies are searched
// (candidates pruned by their lower bound count as done), and a line every 10 s while the plan families and the
// outputs take longer. Under --quiet nothing, unless the run is still going after 10 s: then one line on stderr,
// once, saying how far it is (a run in a script must not look hung, and must not fill its log).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace twin {

class SearchProgress {
 public:
  static constexpr double kNoticeAfter_s = 10;

  explicit SearchProgress(bool quiet);
  ~SearchProgress();  // stops the notice thread
  SearchProgress(const SearchProgress&) = delete;
  SearchProgress& operator=(const SearchProgress&) = delete;

  // The uniform search's callback (SearchOptions::progress): `done` of `total` simulated or pruned.
  void operator()(int done, int total);

 private:
  void notice_while_running();

  bool quiet_, terminal_;
  std::chrono::steady_clock::time_point started_;
  std::atomic<int> done_{0}, total_{-1};  // total -1: the uniform search has not reported yet
  int last_decile_ = 0;
  bool line_ended_ = false;  // the terminal's progress line reached its total
  std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;
  std::thread notices_;
};

}  // namespace twin
