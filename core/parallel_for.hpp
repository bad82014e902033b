// One pool for every parallel loop of twin: `work(k)` for k in [0, count) on `jobs` threads (0 = all cores),
// each index taken once from a shared counter. Results land in slots the caller indexes by k, so they do not
// depend on the thread count. The first exception thrown by any `work` is rethrown after every thread ends.
// `progress(done, count)`, when given, is called on the calling thread about every 200 ms and at the end.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace twin {

template <class Work>
void parallel_for(std::size_t count, int jobs, Work work,
                  const std::function<void(int done, int total)>& progress = {}) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::max(1, std::min<int>(jobs > 0 ? jobs : cores, static_cast<int>(std::max<std::size_t>(1, count))));
  std::atomic<std::size_t> next{0};
  std::atomic<int> done{0};
  std::exception_ptr failure;
  std::mutex mutex;
  std::condition_variable finished;
  {
    std::vector<std::jthread> pool;
    for (int j = 0; j < jobs; ++j)
      pool.emplace_back([&] {
        for (std::size_t k = next++; k < count; k = next++) {
          try {
            work(k);
          } catch (...) {
            std::lock_guard lock(mutex);
            if (!failure) failure = std::current_exception();
          }
          ++done;
          finished.notify_one();
        }
      });
    if (progress) {
      const int total = static_cast<int>(count);
      std::unique_lock lock(mutex);
      for (bool all = false; !all;) {  // the last call always reports the total
        all = finished.wait_for(lock, std::chrono::milliseconds(200), [&] { return done >= total; });
        progress(done, total);
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace twin
