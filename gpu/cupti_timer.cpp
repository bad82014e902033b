// CUPTI hands activity records over in buffers we provide; records are parsed in the completion
// callback (a CUPTI thread) into a mutex-guarded list. External-correlation records map each launch's
// correlation id to the region pushed around it; collect() joins the two.
#include "gpu/cupti_timer.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <cupti.h>

#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

constexpr std::size_t kBufferBytes = 8 * 1024 * 1024;
constexpr CUpti_ExternalCorrelationKind kRegionKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

struct ActivityState {
  std::mutex mutex;
  std::vector<KernelRecord> records;
  std::map<std::uint32_t, std::uint64_t> region_of_correlation;
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<bool> active{false};
  bool callbacks_registered = false;
};

ActivityState& state() {
  static ActivityState s;
  return s;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t,
                               std::size_t valid_bytes) {
  ActivityState& s = state();
  std::vector<KernelRecord> parsed;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> correlations;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      parsed.push_back({kernel->name ? kernel->name : "", kernel->start, kernel->end, kernel->correlationId,
                        kernel->streamId, 0, false});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      parsed.push_back({"memcpy", copy->start, copy->end, copy->correlationId, copy->streamId, 0, true});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const auto* external = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (external->externalKind == kRegionKind) correlations.emplace_back(external->correlationId, external->externalId);
    }
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  std::free(buffer);
  std::lock_guard lock(s.mutex);
  s.records.insert(s.records.end(), parsed.begin(), parsed.end());
  for (const auto& [correlation, region] : correlations) s.region_of_correlation[correlation] = region;
}

// External-correlation records are emitted per runtime/driver API record: without the API kinds enabled
// there are none (seen on an H200, CUPTI 13.0: 0 of 7 GEMM launches attributed). cuBLASLt and NCCL
// launch through either API, so both are on; their records are skipped when parsed.
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER};

}  // namespace

CuptiKernelTimer::CuptiKernelTimer() {
  ActivityState& s = state();
  if (s.active.exchange(true)) throw std::logic_error("CuptiKernelTimer: another timer is already active");
  if (!s.callbacks_registered) {
    TWIN_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    s.callbacks_registered = true;
  }
  for (CUpti_ActivityKind kind : kKinds) TWIN_CUPTI_CHECK(cuptiActivityEnable(kind));
}

CuptiKernelTimer::~CuptiKernelTimer() {
  cudaDeviceSynchronize();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
  ActivityState& s = state();
  {
    std::lock_guard lock(s.mutex);
    s.records.clear();
    s.region_of_correlation.clear();
  }
  s.active = false;
}

void CuptiKernelTimer::begin_region(std::uint64_t region_id) {
  if (region_id == 0) throw std::invalid_argument("CuptiKernelTimer: region id 0 is reserved");
  TWIN_CUPTI_CHECK(cuptiActivityPushExternalCorrelationId(kRegionKind, region_id));
}

void CuptiKernelTimer::end_region() {
  std::uint64_t last = 0;
  TWIN_CUPTI_CHECK(cuptiActivityPopExternalCorrelationId(kRegionKind, &last));
}

std::vector<KernelRecord> CuptiKernelTimer::collect() {
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  TWIN_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  ActivityState& s = state();
  std::lock_guard lock(s.mutex);
  std::vector<KernelRecord> out;
  out.swap(s.records);
  for (KernelRecord& r : out) {
    auto it = s.region_of_correlation.find(r.correlation_id);
    if (it != s.region_of_correlation.end()) r.region = it->second;
  }
  s.region_of_correlation.clear();
  return out;
}

std::uint64_t CuptiKernelTimer::dropped_records() const { return state().dropped.load(); }

std::map<std::uint64_t, double> region_spans_ns(const std::vector<KernelRecord>& records) {
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> bounds;
  for (const KernelRecord& r : records) {
    if (r.region == 0 || r.is_memcpy) continue;
    auto [it, fresh] = bounds.try_emplace(r.region, r.start_ns, r.end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, r.start_ns);
      it->second.second = std::max(it->second.second, r.end_ns);
    }
  }
  std::map<std::uint64_t, double> spans;
  for (const auto& [region, b] : bounds) spans[region] = static_cast<double>(b.second - b.first);
  return spans;
}

}  // namespace twin::gpu
