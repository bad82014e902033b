// The ops at the edges of a stage: the vocab-parallel embedding and cross-entropy (Megatron's order:
// local max, all-reduce max, local sum of exponentials, all-reduce sum, loss) and pipeline send/recv.
#include <stdexcept>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "executor/gpu/stage_runtime.hpp"

namespace twin::exec {
namespace {
constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;
}

void StageRuntime::embedding(const Op& op, const OpBinding& b, int mb, cudaStream_t stream) {
  const std::int64_t tokens = shapes_.tokens, h = shapes_.h, vocab_l = shapes_.vocab;
  const std::int32_t* inputs = tokens_ + 2 * mb * tokens;
  ParameterUnit& unit = params_->unit(kEmbeddingUnit);
  const WeightTensor& table = unit.tensor(OpRole::embedding);
  if (b.action == Action::embedding_forward) {
    auto* out = static_cast<bf16*>(make(mb, kEmbeddingUnit, {Tensor::embedded}, tokens * h * kBf16, stream));
    kernels::embedding_forward(inputs, unit.params + table.offset, out, tokens, h, me_.tp * vocab_l, vocab_l, stream);
    if (shapes_.tp == 1) alias(mb, kEmbeddingUnit, {Tensor::output}, kEmbeddingUnit, {Tensor::embedded});
    return;
  }
  const Act gathered{Tensor::output, Form::gradient_gathered}, from_norm{Tensor::output, Form::next_norm_gradient};
  const auto* dy = static_cast<const bf16*>(has(mb, kEmbeddingUnit, gathered) ? get(mb, kEmbeddingUnit, gathered)
                                                                             : get(mb, kEmbeddingUnit, from_norm));
  kernels::embedding_backward(inputs, dy, embedding_grad_f32_, embedding_workspace_, embedding_workspace_bytes_, tokens,
                              h, me_.tp * vocab_l, vocab_l, stream);
  // The fp32 accumulator (the step's whole embedding gradient) becomes the bf16 gradient once, before the
  // gradient reduction reads it.
  if (b.last_embedding_backward)
    kernels::f32_to_bf16(embedding_grad_f32_, unit.grads + table.offset, vocab_l * h, stream);
  release_slot(mb, kEmbeddingUnit, stream);
}

void StageRuntime::head(const Op& op, const OpBinding& b, int mb, cudaStream_t stream) {
  const std::int64_t tokens = shapes_.tokens, vocab_l = shapes_.vocab;
  const std::int64_t vocab_start = me_.tp * vocab_l;
  const std::int32_t* targets = tokens_ + 2 * mb * tokens + tokens;
  auto* logits = static_cast<bf16*>(get(mb, kHeadUnit, {Tensor::logits}));
  const auto floats = [&](Act name) { return static_cast<float*>(make(mb, kHeadUnit, name, tokens * sizeof(float), stream)); };
  // After the global max: sum of exponentials and the target's logit, summed over TP, then the loss.
  const auto finish_loss = [&](ncclComm_t tensor_comm) {
    float* row_max = static_cast<float*>(get(mb, kHeadUnit, {Tensor::row_max}));
    float* sum_exp = floats({Tensor::sum_exp});
    float* target_logit = floats({Tensor::target_logit});
    kernels::cross_entropy_local_sum_exp(logits, row_max, targets, sum_exp, target_logit, tokens, vocab_l, vocab_start,
                                         stream);
    if (tensor_comm) {
      TWIN_NCCL_CHECK(ncclGroupStart());
      TWIN_NCCL_CHECK(ncclAllReduce(sum_exp, sum_exp, tokens, ncclFloat32, ncclSum, tensor_comm, stream));
      TWIN_NCCL_CHECK(ncclAllReduce(target_logit, target_logit, tokens, ncclFloat32, ncclSum, tensor_comm, stream));
      TWIN_NCCL_CHECK(ncclGroupEnd());
    }
    float* token_loss = floats({Tensor::token_loss});
    kernels::cross_entropy_loss(row_max, sum_exp, target_logit, token_loss, tokens, stream);
    if (me_.tp == 0) kernels::add_sum_f32(token_loss, tokens, loss_sum_, stream);
  };
  switch (b.action) {
    case Action::loss_forward:
      kernels::cross_entropy_local_max(logits, floats({Tensor::row_max}), tokens, vocab_l, stream);
      if (shapes_.tp == 1) finish_loss(nullptr);
      return;
    case Action::loss_reduce: {
      float* row_max = static_cast<float*>(get(mb, kHeadUnit, {Tensor::row_max}));
      TWIN_NCCL_CHECK(ncclAllReduce(row_max, row_max, tokens, ncclFloat32, ncclMax, comms_.tensor(), stream));
      finish_loss(comms_.tensor());
      return;
    }
    case Action::loss_backward: {
      const double global_tokens =
          static_cast<double>(scenario_.training.global_batch_size) * static_cast<double>(scenario_.training.seq_length);
      kernels::cross_entropy_backward(logits, static_cast<const float*>(get(mb, kHeadUnit, {Tensor::row_max})),
                                      static_cast<const float*>(get(mb, kHeadUnit, {Tensor::sum_exp})), targets, logits,
                                      tokens, vocab_l, vocab_start, static_cast<float>(1.0 / global_tokens), stream);
      for (Tensor done : {Tensor::row_max, Tensor::sum_exp, Tensor::target_logit, Tensor::token_loss})
        release(mb, kHeadUnit, {done}, stream);
      // The gradient is written over the logits: it is the output projection's output gradient.
      alias(mb, kHeadUnit, {Tensor::logits, Form::gradient}, kHeadUnit, {Tensor::logits});
      return;
    }
    default: throw std::logic_error("executor: not a loss action");
  }
}

void StageRuntime::pipeline(const Op& op, const OpBinding& b, int mb, cudaStream_t stream) {
  const std::int64_t count = shapes_.tokens_local * shapes_.h;
  const int end = chunk_layers_.at(op.chunk).second;
  const int received = kReceivedUnit - op.chunk;
  switch (b.action) {
    case Action::send_activation: {
      auto [comm, peer] = comms_.p2p(me_.pp, op.peer);
      TWIN_NCCL_CHECK(ncclSend(get(mb, end - 1, {Tensor::output}), count, ncclBfloat16, peer, comm, stream));
      return;
    }
    case Action::recv_activation: {
      auto [comm, peer] = comms_.p2p(op.peer, me_.pp);
      TWIN_NCCL_CHECK(ncclRecv(make(mb, received, {Tensor::output}, count * kBf16, stream), count, ncclBfloat16, peer, comm,
                               stream));
      return;
    }
    case Action::send_gradient: {
      auto [comm, peer] = comms_.p2p(me_.pp, op.peer);
      TWIN_NCCL_CHECK(ncclSend(get(mb, received, {Tensor::output, Form::next_norm_gradient}), count, ncclBfloat16, peer, comm, stream));
      release_slot(mb, received, stream);
      return;
    }
    case Action::recv_gradient: {
      auto [comm, peer] = comms_.p2p(op.peer, me_.pp);
      TWIN_NCCL_CHECK(ncclRecv(make(mb, end - 1, {Tensor::output, Form::next_norm_gradient}, count * kBf16, stream), count, ncclBfloat16, peer,
                               comm, stream));
      return;
    }
    default: throw std::logic_error("executor: not a pipeline action");
  }
}

}  // namespace twin::exec
