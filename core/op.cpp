// Names of the op vocabulary: what traces, reports and messages print for an op and its enums.
#include "core/op.hpp"

#include "core/op_kinds.hpp"

#include <fmt/format.h>

namespace twin {

std::string to_string(OpKind kind) { return std::string(op_kind_traits(kind).name); }

std::string to_string(OpRole role) {
  switch (role) {
    case OpRole::none: return "none";
    case OpRole::embedding: return "embedding";
    case OpRole::input_norm: return "input_norm";
    case OpRole::qkv_projection: return "qkv_projection";
    case OpRole::rope: return "rope";
    case OpRole::core_attention: return "core_attention";
    case OpRole::attention_projection: return "attention_projection";
    case OpRole::attention_residual: return "attention_residual";
    case OpRole::mlp_norm: return "mlp_norm";
    case OpRole::fc1: return "fc1";
    case OpRole::activation: return "activation";
    case OpRole::fc2: return "fc2";
    case OpRole::mlp_residual: return "mlp_residual";
    case OpRole::router: return "router";
    case OpRole::dispatch: return "dispatch";
    case OpRole::expert_fc1: return "expert_fc1";
    case OpRole::expert_activation: return "expert_activation";
    case OpRole::expert_fc2: return "expert_fc2";
    case OpRole::combine: return "combine";
    case OpRole::final_norm: return "final_norm";
    case OpRole::output_projection: return "output_projection";
    case OpRole::loss: return "loss";
    case OpRole::tp_gather: return "tp_gather";
    case OpRole::tp_scatter: return "tp_scatter";
    case OpRole::tp_reduce: return "tp_reduce";
    case OpRole::cp_exchange: return "cp_exchange";
    case OpRole::pipeline_activation: return "pipeline_activation";
    case OpRole::pipeline_gradient: return "pipeline_gradient";
    case OpRole::grad_reduce: return "grad_reduce";
    case OpRole::param_gather: return "param_gather";
    case OpRole::embedding_grad_sync: return "embedding_grad_sync";
    case OpRole::grad_norm: return "grad_norm";
    case OpRole::optimizer: return "optimizer";
    case OpRole::grad_accumulation: return "grad_accumulation";
    case OpRole::phase_handoff: return "phase_handoff";
    case OpRole::qk_norm: return "qk_norm";
    case OpRole::shared_expert_fc1: return "shared_expert_fc1";
    case OpRole::shared_expert_activation: return "shared_expert_activation";
    case OpRole::shared_expert_fc2: return "shared_expert_fc2";
    case OpRole::mla_q_down: return "mla_q_down";
    case OpRole::mla_q_norm: return "mla_q_norm";
    case OpRole::mla_q_up: return "mla_q_up";
    case OpRole::mla_kv_down: return "mla_kv_down";
    case OpRole::mla_kv_norm: return "mla_kv_norm";
    case OpRole::mla_kv_up: return "mla_kv_up";
    case OpRole::mla_kv_expand: return "mla_kv_expand";
    case OpRole::post_attention_norm: return "post_attention_norm";
    case OpRole::post_mlp_norm: return "post_mlp_norm";
    case OpRole::mtp_embedding_norm: return "mtp_embedding_norm";
    case OpRole::mtp_hidden_norm: return "mtp_hidden_norm";
    case OpRole::mtp_projection: return "mtp_projection";
    case OpRole::fp8_amax: return "fp8_amax";
  }
  return "unknown";
}

std::string to_string(Phase phase) {
  switch (phase) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::optimizer: return "optimizer";
  }
  return "unknown";
}

std::string to_string(Stream stream) {
  switch (stream) {
    case Stream::compute: return "compute";
    case Stream::tp_comm: return "tp";
    case Stream::cp_comm: return "cp";
    case Stream::ep_comm: return "ep";
    case Stream::dp_comm: return "dp";
    case Stream::pp_send: return "pp_send";
    case Stream::pp_recv: return "pp_recv";
    case Stream::compute2: return "compute2";
    case Stream::count: break;
  }
  return "unknown";
}

std::string to_string(GroupKind group) {
  switch (group) {
    case GroupKind::none: return "none";
    case GroupKind::tensor: return "tensor";
    case GroupKind::context: return "context";
    case GroupKind::expert: return "expert";
    case GroupKind::data: return "data";
    case GroupKind::pipeline: return "pipeline";
    case GroupKind::expert_data: return "expert_data";
    case GroupKind::embedding: return "embedding";
    case GroupKind::expert_tensor: return "expert_tensor";
    case GroupKind::amax: return "amax";
  }
  return "unknown";
}

// "L3.fc1.fwd.mb2": layer, what (role, else kind), pass, micro-batch; recomputed forward work reads
// "recompute" instead of "fwd"; send/recv read "pipeline_activation.send.mb2".
std::string op_name(const Op& op) {
  // fmt rather than "L" + std::to_string(...): GCC 12 warns falsely (-Wrestrict) on the latter.
  std::string name = op.layer >= 0 ? fmt::format("L{}.", op.layer) : std::string();
  name += op.role == OpRole::none ? to_string(op.kind) : to_string(op.role);
  if (op.kind == OpKind::send || op.kind == OpKind::recv) {
    name += op.kind == OpKind::send ? ".send" : ".recv";
  } else if (op.recomputed) {
    name += ".recompute";
  } else {
    name += op.phase == Phase::forward ? ".fwd" : op.phase == Phase::backward ? ".bwd" : ".opt";
  }
  if (op.micro_batch >= 0) name += fmt::format(".mb{}", op.micro_batch);
  return name;
}

std::string to_string(GemmPass pass) {
  switch (pass) {
    case GemmPass::none: return "none";
    case GemmPass::forward: return "forward";
    case GemmPass::input_gradient: return "input_gradient";
    case GemmPass::weight_gradient: return "weight_gradient";
  }
  return "unknown";
}

std::string to_string(LinearTensor tensor) {
  switch (tensor) {
    case LinearTensor::none: return "none";
    case LinearTensor::input: return "input";
    case LinearTensor::output: return "output";
    case LinearTensor::output_gradient: return "output_gradient";
    case LinearTensor::input_gradient: return "input_gradient";
    case LinearTensor::weight: return "weight";
  }
  return "unknown";
}

std::string to_string(GemmInputs inputs) {
  switch (inputs) {
    case GemmInputs::bf16: return "bf16";
    case GemmInputs::fp8_per_tensor: return "fp8_per_tensor";
    case GemmInputs::fp8_blockwise: return "fp8_blockwise";
    case GemmInputs::mxfp8: return "mxfp8";
    case GemmInputs::fp8_blockwise_1d: return "fp8_blockwise_1d";
  }
  return "unknown";
}

std::string to_string(GemmOutput output) {
  switch (output) {
    case GemmOutput::written: return "written";
    case GemmOutput::written_fp32: return "written_fp32";
    case GemmOutput::added: return "added";
    case GemmOutput::added_fp32: return "added_fp32";
  }
  return "unknown";
}

}  // namespace twin
