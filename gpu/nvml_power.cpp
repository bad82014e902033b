// The entry points are declared from NVML's documented C API (docs.nvidia.com/deploy/nvml-api): every function
// returns nvmlReturn_t (an int enum, NVML_SUCCESS = 0), a device is an opaque pointer, and NVML_CLOCK_SM is 1 in
// nvmlClockType_t. nvmlInit_v2 and nvmlShutdown are reference counted by NVML, so each reader holds one.
#include "gpu/nvml_power.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;

}  // namespace

struct NvmlPower::Library {
  void* handle = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*total_energy)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*max_clock_info)(NvmlDevice, int, unsigned int*) = nullptr;
  NvmlReturn (*enforced_limit)(NvmlDevice, unsigned int*) = nullptr;

  template <typename Function>
  void bind(Function& function, const char* name) {
    function = reinterpret_cast<Function>(dlsym(handle, name));
    if (!function) throw std::runtime_error(std::string("NVML: libnvidia-ml.so.1 has no ") + name);
  }
  void check(NvmlReturn status, const char* call) const {
    if (status != kNvmlSuccess)
      throw std::runtime_error(std::string("NVML call ") + call + " failed: " + error_string(status));
  }
};

NvmlPower::NvmlPower(int cuda_device) : library_(std::make_unique<Library>()) {
  Library& nvml = *library_;
  nvml.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml.handle)
    throw std::runtime_error(std::string("NVML: cannot open libnvidia-ml.so.1 (the driver's library): ") + dlerror());
  try {
    nvml.bind(nvml.init, "nvmlInit_v2");
    nvml.bind(nvml.shutdown, "nvmlShutdown");
    nvml.bind(nvml.error_string, "nvmlErrorString");
    nvml.bind(nvml.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml.bind(nvml.total_energy, "nvmlDeviceGetTotalEnergyConsumption");
    nvml.bind(nvml.power_usage, "nvmlDeviceGetPowerUsage");
    nvml.bind(nvml.clock_info, "nvmlDeviceGetClockInfo");
    nvml.bind(nvml.max_clock_info, "nvmlDeviceGetMaxClockInfo");
    nvml.bind(nvml.enforced_limit, "nvmlDeviceGetEnforcedPowerLimit");
    nvml.check(nvml.init(), "nvmlInit_v2");
  } catch (...) {
    dlclose(nvml.handle);
    throw;
  }
  try {
    char bus_id[64] = {0};
    TWIN_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, cuda_device));
    nvml.check(nvml.by_pci_bus_id(bus_id, &device_), "nvmlDeviceGetHandleByPciBusId_v2");
  } catch (...) {
    nvml.shutdown();
    dlclose(nvml.handle);
    throw;
  }
}

NvmlPower::~NvmlPower() {
  library_->shutdown();  // a failure here leaves nothing to undo: NVML's reference count is its own
  dlclose(library_->handle);
}

double NvmlPower::energy_J() const {
  unsigned long long mJ = 0;
  library_->check(library_->total_energy(device_, &mJ), "nvmlDeviceGetTotalEnergyConsumption");
  return static_cast<double>(mJ) * 1e-3;
}

double NvmlPower::power_W() const {
  unsigned int mW = 0;
  library_->check(library_->power_usage(device_, &mW), "nvmlDeviceGetPowerUsage");
  return mW * 1e-3;
}

double NvmlPower::sm_clock_MHz() const {
  unsigned int MHz = 0;
  library_->check(library_->clock_info(device_, kNvmlClockSm, &MHz), "nvmlDeviceGetClockInfo(NVML_CLOCK_SM)");
  return MHz;
}

double NvmlPower::max_sm_clock_MHz() const {
  unsigned int MHz = 0;
  library_->check(library_->max_clock_info(device_, kNvmlClockSm, &MHz), "nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)");
  return MHz;
}

double NvmlPower::power_limit_W() const {
  unsigned int mW = 0;
  library_->check(library_->enforced_limit(device_, &mW), "nvmlDeviceGetEnforcedPowerLimit");
  return mW * 1e-3;
}

}  // namespace twin::gpu
