// Which GPU preset (core/cluster.hpp) a CUDA device name is, for calibration on the device and for logs
// that name their devices (nccl-tests' "#  Rank  0 ... device  0 [0x07] NVIDIA H100 80GB HBM3").
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace twin {

// The preset of a device named as cudaDeviceProp::name names it ("NVIDIA H100 80GB HBM3" -> "H100-SXM-80GB").
// `memory_GiB` tells the A100 40 GB from the 80 GB where the name does not; 0 = unknown. nullopt when no
// preset matches, or an A100 whose memory neither the name nor `memory_GiB` gives.
std::optional<std::string> gpu_preset_for_device_name(std::string_view device_name, double memory_GiB = 0);

}  // namespace twin
