#include "executor/gpu/tensor_store.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/units.hpp"
#include "gpu/checks.hpp"

namespace twin::exec {

std::string to_string(Act act) {
  static constexpr std::array<const char*, static_cast<int>(Form::count)> kForms{
      "", " (gathered)", " (reduced)", " (gradient)", " (partial gradient)", " (gathered gradient)",
      " (gradient through the next norm)", " (gradient through the next residual)", " (FP8)", " (FP8 rowwise copy)", " (FP8 gradient)",
      " (FP8, gathered)", " (FP8 gradient, gathered)",
      " (before QK-norm, and its statistics)", " (between the block's steps)",
      " (gradients between the block's steps)", " (dropout mask)", " (its linear's weight gradient, apart)"};
  return std::string(layer::to_string(act.tensor)) + kForms[static_cast<int>(act.form)];
}

TensorStore::~TensorStore() {
  for (auto& [key, slot] : slots_)
    for (Buffer& buffer : slot)
      if (buffer.owned) cudaFree(buffer.ptr);
  for (void* p : static_buffers_) cudaFree(p);
}

void* TensorStore::static_buffer(std::size_t bytes) {
  void* p = nullptr;
  TWIN_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)));
  static_buffers_.push_back(p);
  static_bytes_ += bytes;
  return p;
}

bool TensorStore::has(int mb, int unit, Act name) {
  auto found = slots_.find({mb, unit});
  return found != slots_.end() && found->second[name.index()].ptr != nullptr;
}

void* TensorStore::get(int mb, int unit, Act name) {
  auto found = slots_.find({mb, unit});
  if (found == slots_.end() || !found->second[name.index()].ptr)
    throw std::logic_error(fmt::format("executor: tensor {} of micro-batch {} unit {} is not there (rank class {})",
                                       to_string(name), mb, unit, rank_class_));
  return found->second[name.index()].ptr;
}

void* TensorStore::make(int mb, int unit, Act name, std::size_t bytes, cudaStream_t stream) {
  Buffer& buffer = slots_[{mb, unit}][name.index()];
  if (buffer.ptr) return buffer.ptr;  // a recomputed forward writes where the first one did
  if (fail_next_) {  // more than the GPU holds
    fail_next_ = false;
    std::size_t free_bytes = 0, total_bytes = 0;
    TWIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    bytes = total_bytes + (std::size_t{8} << 30);
  }
  // Never zero bytes (an expert rank may receive no rows): a null pointer would read as no tensor.
  const cudaError_t status = cudaMallocAsync(&buffer.ptr, std::max<std::size_t>(bytes, 16), stream);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so that the report below is the error
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw std::runtime_error(fmt::format("out of memory: {} bytes ({:.2f} GiB) for activation {} of micro-batch {} "
                                         "(unit {}); {:.2f} of {:.2f} GiB free", bytes, bytes / kGiB,
                                         to_string(name), mb, unit, free_bytes / kGiB, total_bytes / kGiB));
  }
  TWIN_CUDA_CHECK(status);
  buffer.owned = true;
  return buffer.ptr;
}

void TensorStore::alias(int mb, int unit, Act name, int from_unit, Act from) {
  Buffer& buffer = slots_[{mb, unit}][name.index()];
  if (buffer.ptr) return;
  buffer.ptr = get(mb, from_unit, from);
  buffer.owned = false;
}

void TensorStore::release(int mb, int unit, Act name, cudaStream_t stream) {
  auto found = slots_.find({mb, unit});
  if (found == slots_.end()) return;
  Buffer& buffer = found->second[name.index()];
  if (buffer.ptr && buffer.owned) TWIN_CUDA_CHECK(cudaFreeAsync(buffer.ptr, stream));
  buffer = Buffer{};
}

void TensorStore::release_slot(int mb, int unit, cudaStream_t stream, Act keep) {
  auto found = slots_.find({mb, unit});
  if (found == slots_.end()) return;
  Slot& slot = found->second;
  for (int name = 0; name < kActCount; ++name) {
    if (keep != kNoAct && name == keep.index()) continue;
    Buffer& buffer = slot[name];
    if (buffer.ptr && buffer.owned) TWIN_CUDA_CHECK(cudaFreeAsync(buffer.ptr, stream));
    buffer = Buffer{};
  }
  if (keep == kNoAct) slots_.erase(found);
}

void TensorStore::move(int mb, int from_unit, Act from, int to_unit, Act to) {
  Buffer& source = slots_[{mb, from_unit}][from.index()];
  Buffer& target = slots_[{mb, to_unit}][to.index()];
  if (target.ptr) throw std::logic_error("executor: moving a tensor onto one that is there");
  target = source;
  source = Buffer{};
}

void TensorStore::check_empty() const {
  if (!slots_.empty())
    throw std::logic_error(fmt::format("executor: {} activation slots outlived the iteration (first: micro-batch {}, "
                                       "unit {})", slots_.size(), slots_.begin()->first.first,
                                       slots_.begin()->first.second));
}

}  // namespace twin::exec
