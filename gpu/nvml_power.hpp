// A GPU's energy counter, power, SM clock and power limit through NVML, read only: nothing is ever set.
//
// Why it is opened at run time: NVML ships with the driver (libnvidia-ml.so.1), and neither its library nor nvml.h
// is part of the CUDA toolkit on every build machine (the development machine of 2026-11-29 has neither), so the
// handful of documented entry points used here are looked up with dlopen/dlsym when a reader is made, and a machine
// without the driver gets a clear error then, not a link failure. Every NVML call is checked: a failing one throws
// std::runtime_error naming the call and NVML's own error string.
#pragma once
#include <memory>

namespace twin::gpu {

class NvmlPower {
 public:
  // The NVML device of CUDA device `cuda_device`, matched by its PCI bus id (NVML's order may differ from CUDA's).
  explicit NvmlPower(int cuda_device);
  ~NvmlPower();
  NvmlPower(const NvmlPower&) = delete;
  NvmlPower& operator=(const NvmlPower&) = delete;

  // The energy the GPU drew since the driver loaded, in joules (nvmlDeviceGetTotalEnergyConsumption, mJ): the
  // mean power over an interval is the difference of two readings over its length.
  double energy_J() const;
  double power_W() const;             // nvmlDeviceGetPowerUsage: NVML's current power reading (mW)
  double sm_clock_MHz() const;        // nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
  double max_sm_clock_MHz() const;    // nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)
  double power_limit_W() const;       // nvmlDeviceGetEnforcedPowerLimit: the cap the limiter holds

 private:
  struct Library;
  std::unique_ptr<Library> library_;
  void* device_ = nullptr;  // nvmlDevice_t
};

}  // namespace twin::gpu
