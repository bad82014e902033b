// Error checks for CUDA, cuBLAS(Lt), cuDNN, NCCL and CUPTI calls: a failing call throws std::runtime_error
// naming the file, the line, the call and the library's own error string. Shared with the executor.
#pragma once
#include <stdexcept>
#include <string>

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cupti.h>
#include <nccl.h>

namespace twin::gpu {

[[noreturn]] inline void throw_gpu_error(const char* library, const char* call, const char* file, int line,
                                         const std::string& message) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + library + " call " + call +
                           " failed: " + message);
}

// cuDNN's status name and, where it has one, its last error message (what the backend refused and why).
inline std::string cudnn_error_string(cudnnStatus_t status) {
  char message[512] = {0};
  cudnnGetLastErrorString(message, sizeof message);
  return std::string(cudnnGetErrorString(status)) + (message[0] ? std::string(": ") + message : std::string());
}

inline std::string cupti_error_string(CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return text ? text : "CUPTI error " + std::to_string(static_cast<int>(result));
}

}  // namespace twin::gpu

#define TWIN_CUDA_CHECK(call)                                                                     \
  do {                                                                                            \
    cudaError_t twin_status_ = (call);                                                            \
    if (twin_status_ != cudaSuccess)                                                              \
      ::twin::gpu::throw_gpu_error("CUDA", #call, __FILE__, __LINE__,                             \
                                   std::string(cudaGetErrorName(twin_status_)) + ": " +           \
                                       cudaGetErrorString(twin_status_));                         \
  } while (0)

// After a kernel launch: launch-configuration errors surface only through cudaGetLastError.
#define TWIN_CUDA_CHECK_LAUNCH() TWIN_CUDA_CHECK(cudaGetLastError())

#define TWIN_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                            \
    cublasStatus_t twin_status_ = (call);                                                         \
    if (twin_status_ != CUBLAS_STATUS_SUCCESS)                                                    \
      ::twin::gpu::throw_gpu_error("cuBLAS", #call, __FILE__, __LINE__,                           \
                                   std::string(cublasGetStatusName(twin_status_)) + ": " +        \
                                       cublasGetStatusString(twin_status_));                      \
  } while (0)

#define TWIN_CUDNN_CHECK(call)                                                                    \
  do {                                                                                            \
    cudnnStatus_t twin_status_ = (call);                                                          \
    if (twin_status_ != CUDNN_STATUS_SUCCESS)                                                     \
      ::twin::gpu::throw_gpu_error("cuDNN", #call, __FILE__, __LINE__,                            \
                                   ::twin::gpu::cudnn_error_string(twin_status_));                \
  } while (0)

#define TWIN_NCCL_CHECK(call)                                                                     \
  do {                                                                                            \
    ncclResult_t twin_status_ = (call);                                                           \
    if (twin_status_ != ncclSuccess && twin_status_ != ncclInProgress)                            \
      ::twin::gpu::throw_gpu_error("NCCL", #call, __FILE__, __LINE__,                             \
                                   std::string(ncclGetErrorString(twin_status_)) + " (" +         \
                                       ncclGetLastError(nullptr) + ")");                          \
  } while (0)

#define TWIN_CUPTI_CHECK(call)                                                                    \
  do {                                                                                            \
    CUptiResult twin_status_ = (call);                                                            \
    if (twin_status_ != CUPTI_SUCCESS)                                                            \
      ::twin::gpu::throw_gpu_error("CUPTI", #call, __FILE__, __LINE__,                            \
                                   ::twin::gpu::cupti_error_string(twin_status_));                \
  } while (0)
