// A PyTorch profiler trace as twin reads it: the Chrome JSON that torch.profiler (Kineto) exports, gzipped or
// not, one file per rank. What twin keeps of it: the CPU ops with their input shapes (record_shapes=True) and the
// op enclosing each, the GPU activities (kernels, memory copies and sets) with the op that launched them, the
// profiler's step marks, the rank and the GPU's name. The file is read event by event, so memory grows with the
// events kept, not with the text; a file beyond kMaxKinetoTraceBytes (uncompressed) or kMaxKinetoEvents events
// is refused.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace twin {

inline constexpr std::uint64_t kMaxKinetoTraceBytes = std::uint64_t{4} << 30;
inline constexpr std::size_t kMaxKinetoEvents = 40'000'000;

// A NCCL call's sizes as PyTorch's record_param_comms op records them.
struct KinetoComms {
  std::int32_t collective = -1;  // name index: "allreduce", "allgather_into_tensor_coalesced", ...
  std::int64_t in_elements = 0, out_elements = 0;
  std::int32_t dtype = -1;       // name index: "BFloat16", "Float", ...
  std::int32_t group_size = 0;
};

struct KinetoCpuOp {
  std::int32_t name = 0;         // index into KinetoTrace::names
  std::int64_t external_id = -1;
  std::int64_t ts_ns = 0, dur_ns = 0;
  std::int64_t tid = 0;
  bool annotation = false;       // a user_annotation (record_function: "FSDP::...", "Optimizer.step#...")
  std::vector<std::vector<std::int64_t>> dims;  // "Input Dims", one list per input ([] for non-tensors)
  std::int32_t first_type = -1;  // name index of the first input's type ("c10::BFloat16")
  KinetoComms comms;
  std::int32_t parent = -1;      // the op enclosing it on its thread (index into ops), -1 at the top
};

enum class KinetoGpuKind : std::uint8_t { kernel, memcpy, memset };

struct KinetoGpuEvent {
  KinetoGpuKind kind = KinetoGpuKind::kernel;
  std::int32_t name = 0;
  std::int64_t ts_ns = 0, dur_ns = 0;
  std::int64_t stream = 0;
  std::int64_t external_id = -1;  // the launching CPU op's; -1 when the trace names none
  std::int64_t correlation = -1;  // the CUDA runtime call that launched it
  std::int64_t bytes = 0;         // copies and sets
};

struct KinetoStep {
  std::int64_t ts_ns = 0, dur_ns = 0;  // a ProfilerStep#N mark on the CPU
};

struct KinetoTrace {
  std::string file;
  int rank = 0, world_size = 1;  // distributedInfo; 0 and 1 when absent
  std::string device_name;       // deviceProperties[0].name, "NVIDIA H200"; empty when absent
  std::vector<std::string> names;
  std::vector<KinetoCpuOp> ops;  // sorted by (thread, start, longest first); parents linked
  std::vector<KinetoGpuEvent> gpu;  // by start time
  std::vector<KinetoStep> steps;    // by start time
  // The op a GPU event belongs to: by its External id, else through its runtime call's correlation; -1: none.
  std::int32_t launching_op(const KinetoGpuEvent& event) const;

  // Filled by read_kineto_trace: External id -> op index, runtime correlation -> External id.
  std::vector<std::pair<std::int64_t, std::int32_t>> op_by_external_id;  // sorted by id
  std::vector<std::pair<std::int64_t, std::int64_t>> external_by_correlation;  // sorted by correlation
};

// Reads one trace; InputError (file, "event N" or the JSON path, expected X) for anything else.
KinetoTrace read_kineto_trace(const std::filesystem::path& file);

}  // namespace twin
