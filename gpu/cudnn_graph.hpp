// A small layer over cuDNN's backend (graph) API: tensors and operations declared by unique id, an
// operation graph finalized into the first execution plan cuDNN's heuristics offer, and execution with
// a variant pack. Only what the fused-attention graphs (gpu/attention.cpp) need: matmul, pointwise,
// reduction, reshape and Bernoulli RNG operations. Every backend call is checked (TWIN_CUDNN_CHECK).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <cudnn.h>

namespace twin::gpu::cudnn {

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t raw() const { return raw_; }
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
                  const void* values);
  Descriptor& set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& value);
  void finalize();

 private:
  cudnnBackendDescriptor_t raw_ = nullptr;
};

// How a tensor of the graph is bound: memory passed at execution, an intermediate that never reaches
// memory, or a host scalar passed by value at execution.
enum class Binding { memory, intermediate, host_scalar };

// An operation graph under construction. Tensor ids are the caller's; they name the pointers at execution.
class GraphBuilder {
 public:
  void tensor(std::int64_t uid, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& strides,
              cudnnDataType_t type, Binding binding = Binding::memory);
  // A [1,1,1,1] host scalar.
  void scalar(std::int64_t uid, cudnnDataType_t type) { tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, type, Binding::host_scalar); }

  // c = a b over the last two dimensions, broadcasting the leading ones; fp32 accumulation.
  void matmul(std::int64_t a, std::int64_t b, std::int64_t c);
  // y = mode(x[, b[, t]]) computed in `compute`; `axis` for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, std::int64_t y, std::int64_t x, std::int64_t b = -1, std::int64_t t = -1,
                 cudnnDataType_t compute = CUDNN_DATA_FLOAT, std::int64_t axis = -1);
  // dx = mode's derivative at the forward input x times dy (a *_BWD pointwise mode such as TANH_BWD), in fp32.
  void pointwise_backward(cudnnPointwiseMode_t mode, std::int64_t dx, std::int64_t dy, std::int64_t x);
  // y = reduce(x) over the dimensions where y has extent 1; fp32.
  void reduction(cudnnReduceTensorOp_t op, std::int64_t x, std::int64_t y);
  // y is x viewed with other dimensions and strides (a transpose of the last two here).
  void reshape(std::int64_t x, std::int64_t y);
  // y = 1 with probability `keep_probability`, else 0, elementwise: cuDNN's Philox generator keyed by the int64
  // tensors `seed` and `offset` (the frontend's RNG node, as its SDPA dropout lowers it).
  void bernoulli(double keep_probability, std::int64_t seed, std::int64_t offset, std::int64_t y);

  // The operation graph, finalized on `handle`.
  Descriptor finalize(cudnnHandle_t handle);

 private:
  const Descriptor& at(std::int64_t uid) const;
  std::map<std::int64_t, Descriptor> tensors_;
  std::vector<Descriptor> attributes_;  // pointwise/matmul/reduction descriptors the operations point to
  std::vector<Descriptor> operations_;
};

// An execution plan: the first engine configuration cuDNN's heuristics rank for the graph that finalizes.
class Plan {
 public:
  // Throws naming `what` when no engine supports the graph.
  Plan(cudnnHandle_t handle, const Descriptor& graph, const std::string& what);
  std::int64_t workspace_bytes() const { return workspace_bytes_; }
  // pointers: (uid, device pointer or, for host scalars, host pointer) for every non-intermediate tensor.
  void execute(cudnnHandle_t handle, const std::vector<std::pair<std::int64_t, void*>>& pointers,
               void* workspace) const;

 private:
  Descriptor plan_;
  std::int64_t workspace_bytes_ = 0;
};

}  // namespace twin::gpu::cudnn
