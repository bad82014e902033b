#include "gpu/cudnn_graph.hpp"

#include <stdexcept>

#include "gpu/checks.hpp"

// The operation graph and the plan name their handle through attributes cuDNN 9.19 marks deprecated
// (in favour of device properties); the device machines run cuDNN 9.14, where they are the way.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace twin::gpu::cudnn {

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) { TWIN_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &raw_)); }

Descriptor::~Descriptor() {
  if (raw_) cudnnBackendDestroyDescriptor(raw_);
}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (raw_) cudnnBackendDestroyDescriptor(raw_);
    raw_ = std::exchange(other.raw_, nullptr);
  }
  return *this;
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
                            const void* values) {
  TWIN_CUDNN_CHECK(cudnnBackendSetAttribute(raw_, name, type, count, values));
  return *this;
}

Descriptor& Descriptor::set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& value) {
  cudnnBackendDescriptor_t raw = value.raw();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void Descriptor::finalize() { TWIN_CUDNN_CHECK(cudnnBackendFinalize(raw_)); }

void GraphBuilder::tensor(std::int64_t uid, const std::vector<std::int64_t>& dims,
                          const std::vector<std::int64_t>& strides, cudnnDataType_t type, Binding binding) {
  if (tensors_.count(uid)) throw std::logic_error("cuDNN graph: tensor id " + std::to_string(uid) + " declared twice");
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::int64_t alignment = 16;
  const bool is_virtual = binding == Binding::intermediate, by_value = binding == Binding::host_scalar;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<std::int64_t>(dims.size()), dims.data())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<std::int64_t>(strides.size()), strides.data())
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
  t.finalize();
  tensors_.emplace(uid, std::move(t));
}

const Descriptor& GraphBuilder::at(std::int64_t uid) const {
  auto it = tensors_.find(uid);
  if (it == tensors_.end()) throw std::logic_error("cuDNN graph: tensor id " + std::to_string(uid) + " not declared");
  return it->second;
}

void GraphBuilder::matmul(std::int64_t a, std::int64_t b, std::int64_t c) {
  Descriptor desc(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute).finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, at(a))
      .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, at(b))
      .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, at(c))
      .set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc)
      .finalize();
  attributes_.push_back(std::move(desc));
  operations_.push_back(std::move(op));
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, std::int64_t y, std::int64_t x, std::int64_t b, std::int64_t t,
                             cudnnDataType_t compute, std::int64_t axis) {
  Descriptor desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  if (axis >= 0) desc.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  desc.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc)
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, at(x));
  if (b >= 0) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, at(b));
  if (t >= 0) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, at(t));
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, at(y)).finalize();
  attributes_.push_back(std::move(desc));
  operations_.push_back(std::move(op));
}

void GraphBuilder::pointwise_backward(cudnnPointwiseMode_t mode, std::int64_t dx, std::int64_t dy, std::int64_t x) {
  Descriptor desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  desc.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc)
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, at(x))
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, at(dy))
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, at(dx))
      .finalize();
  attributes_.push_back(std::move(desc));
  operations_.push_back(std::move(op));
}

void GraphBuilder::reduction(cudnnReduceTensorOp_t reduce, std::int64_t x, std::int64_t y) {
  Descriptor desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, at(x))
      .set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, at(y))
      .set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc)
      .finalize();
  attributes_.push_back(std::move(desc));
  operations_.push_back(std::move(op));
}

void GraphBuilder::reshape(std::int64_t x, std::int64_t y) {
  Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, at(x))
      .set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, at(y))
      .finalize();
  operations_.push_back(std::move(op));
}

void GraphBuilder::bernoulli(double keep_probability, std::int64_t seed, std::int64_t offset, std::int64_t y) {
  Descriptor desc(CUDNN_BACKEND_RNG_DESCRIPTOR);
  const cudnnRngDistribution_t distribution = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
  desc.set(CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &distribution)
      .set(CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &keep_probability)
      .finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_RNG_YDESC, at(y))
      .set_descriptor(CUDNN_ATTR_OPERATION_RNG_DESC, desc)
      .set_descriptor(CUDNN_ATTR_OPERATION_RNG_SEED, at(seed))
      .set_descriptor(CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, at(offset))
      .finalize();
  attributes_.push_back(std::move(desc));
  operations_.push_back(std::move(op));
}

Descriptor GraphBuilder::finalize(cudnnHandle_t handle) {
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const Descriptor& op : operations_) ops.push_back(op.raw());
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(ops.size()),
           ops.data())
      .finalize();
  return graph;
}

namespace {

// The engine configurations cuDNN's heuristics (`mode`) rank for `graph`, best first.
std::vector<Descriptor> ranked_configs(const Descriptor& graph, cudnnBackendHeurMode_t mode) {
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (cudnnBackendFinalize(heuristics.raw()) != CUDNN_STATUS_SUCCESS) return {};
  std::int64_t count = 0;
  TWIN_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.raw(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().raw());
  }
  std::int64_t returned = 0;
  if (count > 0)
    TWIN_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.raw(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()));
  configs.erase(configs.begin() + returned, configs.end());
  return configs;
}

}  // namespace

Plan::Plan(cudnnHandle_t handle, const Descriptor& graph, const std::string& what)
    : plan_(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
  std::string refusals;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (const Descriptor& config : ranked_configs(graph, mode)) {
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
          .set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
      const cudnnStatus_t status = cudnnBackendFinalize(plan.raw());
      if (status != CUDNN_STATUS_SUCCESS) {
        if (refusals.size() < 600) refusals += " [" + gpu::cudnn_error_string(status) + "]";
        continue;
      }
      std::int64_t returned = 0;
      TWIN_CUDNN_CHECK(cudnnBackendGetAttribute(plan.raw(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                CUDNN_TYPE_INT64, 1, &returned, &workspace_bytes_));
      plan_ = std::move(plan);
      return;
    }
  }
  throw std::runtime_error("cuDNN has no engine for " + what + (refusals.empty() ? "" : ":" + refusals));
}

void Plan::execute(cudnnHandle_t handle, const std::vector<std::pair<std::int64_t, void*>>& pointers,
                   void* workspace) const {
  std::vector<std::int64_t> uids;
  std::vector<void*> data;
  for (const auto& [uid, pointer] : pointers) {
    uids.push_back(uid);
    data.push_back(pointer);
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<std::int64_t>(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(data.size()),
           data.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize();
  TWIN_CUDNN_CHECK(cudnnBackendExecute(handle, plan_.raw(), pack.raw()));
}

}  // namespace twin::gpu::cudnn
