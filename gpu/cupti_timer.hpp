// Kernel timing from CUPTI activity records: while a CuptiKernelTimer lives, every kernel and memcpy
// the process runs is recorded with its device start/end (ns). Launches between begin_region(id) and
// end_region() carry `id` (a CUPTI external correlation id), so one measured op = one region.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace twin::gpu {

struct KernelRecord {
  std::string name;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t correlation_id = 0;
  std::uint32_t stream_id = 0;
  std::uint64_t region = 0;  // 0: launched outside any region
  bool is_memcpy = false;
};

// One per process at a time (CUPTI's activity buffers are process-wide); construction throws otherwise.
class CuptiKernelTimer {
 public:
  CuptiKernelTimer();
  ~CuptiKernelTimer();
  CuptiKernelTimer(const CuptiKernelTimer&) = delete;
  CuptiKernelTimer& operator=(const CuptiKernelTimer&) = delete;

  // Region ids must be non-zero; regions do not nest.
  void begin_region(std::uint64_t region_id);
  void end_region();
  // Synchronizes the device, flushes CUPTI and returns (and forgets) the records since the last call.
  std::vector<KernelRecord> collect();
  // Records CUPTI reported dropped (buffers full) since construction: a non-zero count voids timings.
  std::uint64_t dropped_records() const;
};

// Per region: last kernel end minus first kernel start (an op that launches several kernels counts the
// gaps between them too, as the executor will see it). Memcpy records are ignored; region 0 too.
std::map<std::uint64_t, double> region_spans_ns(const std::vector<KernelRecord>& records);

}  // namespace twin::gpu
