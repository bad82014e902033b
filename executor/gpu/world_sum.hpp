// The step's loss summed over every rank: a float all-reduced over the world communicator on a stream of its own,
// under the watchdog (a rank whose peers never join is a hang).
#pragma once
#include <cuda_runtime.h>

#include "executor/gpu/communicators.hpp"
#include "executor/watchdog.hpp"

namespace twin::exec {

class WorldSum {
 public:
  WorldSum(Communicators& comms, Watchdog& watchdog, int rank);
  ~WorldSum();
  WorldSum(const WorldSum&) = delete;
  WorldSum& operator=(const WorldSum&) = delete;

  // `value` summed over every rank (every rank calls it).
  float operator()(float value);

 private:
  Communicators& comms_;
  Watchdog& watchdog_;
  int rank_ = 0;
  float* device_ = nullptr;
  cudaStream_t side_ = nullptr;
  cudaEvent_t summed_ = nullptr;
};

}  // namespace twin::exec
