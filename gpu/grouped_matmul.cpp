// Row-major C = A B is column-major C^T = B^T A^T (as in gpu/matmul.cpp): each group is cuBLAS's product with
// its first operand our B, its second our A, and m and n swapped; a row-major [r,c] matrix is a column-major
// c x r one with leading dimension c. Each product is a cuBLAS "group" of one (group_size 1), since the shapes
// differ. The 64-bit interface (cublasGemmGroupedBatchedEx_64) takes the sizes as they come.
//
// cuBLAS reads the sizes, transposes and scalars from host memory during the call, but the A/B/C pointer
// arrays from device memory when the GEMM runs. They travel by cudaMemcpyAsync from pinned host staging, on
// the GEMM's stream; the staging must not change until that copy has run, nor the device arrays until the
// GEMM has. So each run takes one of kSlots slots in turn (staging + device arrays), and before refilling a
// slot the host waits for the event recorded after that slot's last GEMM: a wait that only blocks when the
// host is kSlots grouped GEMMs ahead of the GPU, and that also holds when runs alternate between streams.
#include "gpu/grouped_matmul.hpp"

#include <stdexcept>
#include <string>

#include "gpu/checks.hpp"

namespace twin::exec {

struct GroupedMatmul::Slot {
  const void** host = nullptr;  // pinned: `capacity` pointers for each of A, B, C (cuBLAS's order)
  gpu::DeviceBuffer device;
  std::size_t capacity = 0;
  cudaEvent_t done = nullptr;  // recorded after the last GEMM that read this slot

  Slot() { TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming)); }
  ~Slot() {
    if (host) cudaFreeHost(host);
    if (done) cudaEventDestroy(done);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  // Room for `groups` products; called once `done` has completed, so nothing in flight reads the old arrays.
  void reserve(std::size_t groups) {
    if (groups <= capacity) return;
    if (host) TWIN_CUDA_CHECK(cudaFreeHost(host));
    host = nullptr;
    capacity = 0;
    TWIN_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), 3 * groups * sizeof(void*)));
    device = gpu::DeviceBuffer(3 * groups * sizeof(void*));
    capacity = groups;
  }
};

namespace {

void check_group(const GemmGroup& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0)
    throw std::invalid_argument("GroupedMatmul: negative size m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
                                " k=" + std::to_string(g.k));
  if (g.m > 0 && g.n > 0 && (g.c == nullptr || (g.k > 0 && (g.a == nullptr || g.b == nullptr))))
    throw std::invalid_argument("GroupedMatmul: a null operand in a group of m=" + std::to_string(g.m) +
                                " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k));
}

}  // namespace

GroupedMatmul::GroupedMatmul() : workspace_(kWorkspaceBytes) {
  TWIN_CUBLAS_CHECK(cublasCreate(&handle_));
  for (int i = 0; i < kSlots; ++i) slots_.push_back(std::make_unique<Slot>());
}

GroupedMatmul::~GroupedMatmul() {
  for (auto& slot : slots_) cudaEventSynchronize(slot->done);  // in-flight copies still read the staging
  slots_.clear();
  cublasDestroy(handle_);
}

void GroupedMatmul::run(std::span<const GemmGroup> groups, bool transpose_a, bool transpose_b, bool accumulate,
                        cudaStream_t stream) {
  std::vector<const GemmGroup*> products;
  for (const GemmGroup& g : groups) {
    check_group(g);
    if (g.m == 0 || g.n == 0) continue;
    if (g.k == 0) {  // an empty sum: C = 0, or C unchanged when accumulating (bf16 zero is all-zero bits)
      if (!accumulate) TWIN_CUDA_CHECK(cudaMemsetAsync(g.c, 0, g.m * g.n * sizeof(__nv_bfloat16), stream));
      continue;
    }
    products.push_back(&g);
  }
  if (products.empty()) return;
  const std::size_t count = products.size();

  Slot& slot = *slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % kSlots;
  TWIN_CUDA_CHECK(cudaEventSynchronize(slot.done));
  slot.reserve(count);
  // Per group, in cuBLAS's terms (column-major C^T = B^T A^T): its m, n are our n, m; its A is our B.
  const cublasOperation_t op_first = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  std::vector<cublasOperation_t> trans_first(count, op_first), trans_second(count, op_second);
  std::vector<std::int64_t> rows(count), cols(count), inner(count), ld_first(count), ld_second(count), ld_out(count);
  const std::vector<std::int64_t> group_size(count, 1);
  const std::vector<float> alpha(count, 1.0f), beta(count, accumulate ? 1.0f : 0.0f);
  for (std::size_t i = 0; i < count; ++i) {
    const GemmGroup& g = *products[i];
    rows[i] = g.n;
    cols[i] = g.m;
    inner[i] = g.k;
    ld_first[i] = transpose_b ? g.k : g.n;   // B stored [n,k] or [k,n]
    ld_second[i] = transpose_a ? g.m : g.k;  // A stored [k,m] or [m,k]
    ld_out[i] = g.n;
    slot.host[i] = g.b;
    slot.host[count + i] = g.a;
    slot.host[2 * count + i] = g.c;
  }
  const auto* device_pointers = static_cast<const void* const*>(slot.device.data());
  void* const* device_out = static_cast<void* const*>(slot.device.data()) + 2 * count;

  TWIN_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  // After cublasSetStream, which resets the workspace to cuBLAS's default pool: our buffer on every stream.
  TWIN_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
  TWIN_CUDA_CHECK(cudaMemcpyAsync(slot.device.data(), slot.host, 3 * count * sizeof(void*), cudaMemcpyHostToDevice,
                                  stream));
  const cublasStatus_t status = cublasGemmGroupedBatchedEx_64(
      handle_, trans_first.data(), trans_second.data(), rows.data(), cols.data(), inner.data(), alpha.data(),
      device_pointers, CUDA_R_16BF, ld_first.data(), device_pointers + count, CUDA_R_16BF, ld_second.data(),
      beta.data(), device_out, CUDA_R_16BF, ld_out.data(), static_cast<std::int64_t>(count), group_size.data(),
      CUBLAS_COMPUTE_32F);
  // Recorded whatever the status: the copy above is enqueued and reads the staging until it has run.
  TWIN_CUDA_CHECK(cudaEventRecord(slot.done, stream));
  TWIN_CUBLAS_CHECK(status);
}

}  // namespace twin::exec
