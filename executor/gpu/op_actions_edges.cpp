// The ops at the edges of a stage: the vocab-parallel embedding and cross-entropy (one pass for each
// shard's max and sum of exponentials; all-reduce max, rescale, all-reduce sum, loss) and pipeline send/recv.
#include <stdexcept>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "executor/stage_boundary.hpp"

namespace twin::exec {
namespace {
constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;
}

void StageRuntime::embedding(const Op& op, const OpBinding& b, int mb, cudaStream_t stream) {
  const UnitLayout& layout = this->layout(kEmbeddingUnit);
  const std::int64_t tokens = layout.shapes.tokens, h = layout.shapes.h, vocab_l = layout.shapes.vocab;
  const std::int64_t vocab_start = layout.tp_rank * vocab_l;
  const std::int32_t* inputs = tokens_ + mb * (input_tokens() + target_tokens());
  ParameterUnit& unit = params_->unit(kEmbeddingUnit);
  const WeightTensor& table = unit.tensor(OpRole::embedding);
  if (b.action == Action::embedding_forward) {
    auto* out = static_cast<bf16*>(tensors_.make(mb, kEmbeddingUnit, {Tensor::embedded}, tokens * h * kBf16, stream));
    launch_op(op, b, gpu::EmbeddingForward{inputs, unit.params + table.offset, out, tokens, h, vocab_start, vocab_l},
              stream);
    if (layout.shapes.tp == 1) tensors_.alias(mb, kEmbeddingUnit, {Tensor::output}, kEmbeddingUnit, {Tensor::embedded});
    return;
  }
  const Act gathered{Tensor::output, Form::gradient_gathered}, from_norm{Tensor::output, Form::next_norm_gradient};
  const auto* dy = static_cast<const bf16*>(tensors_.has(mb, kEmbeddingUnit, gathered) ? tensors_.get(mb, kEmbeddingUnit, gathered)
                                                                             : tensors_.get(mb, kEmbeddingUnit, from_norm));
  // The step's first embedding backward starts the table's gradient from zeros: rows no token of the step
  // names keep them. Later micro-batches add to it, as the other weights' gradients do.
  launch_op(op, b,
            gpu::EmbeddingBackward{inputs, dy, unit.grads + table.offset, embedding_workspace_,
                                   embedding_workspace_bytes_, b.first_gradient, tokens, h, vocab_start, vocab_l},
            stream);
  tensors_.release_slot(mb, kEmbeddingUnit, stream);
}

void StageRuntime::head(const Op& op, const OpBinding& b, int mb, cudaStream_t stream) {
  const UnitLayout& layout = this->layout(kHeadUnit);
  const std::int64_t tokens = layout.shapes.tokens, vocab_l = layout.shapes.vocab;
  const std::int64_t vocab_start = layout.tp_rank * vocab_l;
  const std::int32_t* targets = tokens_ + mb * (input_tokens() + target_tokens()) + input_tokens();
  auto* logits = static_cast<bf16*>(tensors_.get(mb, kHeadUnit, {Tensor::logits}));
  const auto floats = [&](Act name) { return static_cast<float*>(tensors_.make(mb, kHeadUnit, name, tokens * sizeof(float), stream)); };
  const auto existing = [&](Tensor name) { return static_cast<float*>(tensors_.get(mb, kHeadUnit, {name})); };
  // With the global max, the sum of exponentials and the target's logit summed over TP: the loss.
  const auto finish_loss = [&] {
    float* token_loss = floats({Tensor::token_loss});
    kernels::cross_entropy_loss(existing(Tensor::global_row_max), existing(Tensor::sum_exp),
                                existing(Tensor::target_logit), token_loss, tokens, stream);
    if (layout.tp_rank == 0) kernels::add_sum_f32(token_loss, tokens, loss_sum_, stream);
  };
  switch (b.action) {
    case Action::loss_forward: {
      // The vocabulary whole on this GPU: the loss follows the statistics at once (split over TP: after loss_reduce).
      const bool whole = layout.shapes.tp == 1;
      launch_op(op, b,
                gpu::LossForward{logits, targets, floats({Tensor::row_max}), floats({Tensor::sum_exp}),
                                 floats({Tensor::target_logit}), whole ? floats({Tensor::token_loss}) : nullptr,
                                 whole ? loss_sum_ : nullptr, tokens, vocab_l, vocab_start},
                stream);
      if (whole) tensors_.alias(mb, kHeadUnit, {Tensor::global_row_max}, kHeadUnit, {Tensor::row_max});
      return;
    }
    case Action::loss_reduce: {
      // Megatron's order: all-reduce the max; each shard's sum rescaled to it; all-reduce the sums.
      ncclComm_t tensor_comm = layout.tensor;
      float* global_max = floats({Tensor::global_row_max});
      float* sum_exp = existing(Tensor::sum_exp);
      float* target_logit = existing(Tensor::target_logit);
      TWIN_NCCL_CHECK(ncclAllReduce(existing(Tensor::row_max), global_max, tokens, ncclFloat32, ncclMax, tensor_comm,
                                    stream));
      kernels::cross_entropy_rescale_sum_exp(existing(Tensor::row_max), global_max, sum_exp, tokens, stream);
      TWIN_NCCL_CHECK(ncclGroupStart());
      TWIN_NCCL_CHECK(ncclAllReduce(sum_exp, sum_exp, tokens, ncclFloat32, ncclSum, tensor_comm, stream));
      TWIN_NCCL_CHECK(ncclAllReduce(target_logit, target_logit, tokens, ncclFloat32, ncclSum, tensor_comm, stream));
      TWIN_NCCL_CHECK(ncclGroupEnd());
      finish_loss();
      return;
    }
    case Action::loss_backward: {
      // The mean over every token of the step (all its parts).
      const double global_tokens =
          part_.loss_tokens > 0 ? static_cast<double>(part_.loss_tokens)
                                : static_cast<double>(scenario_.training.global_batch_size) *
                                      static_cast<double>(scenario_.training.seq_length);
      launch_op(op, b,
                gpu::LossBackward{logits, existing(Tensor::global_row_max), existing(Tensor::sum_exp), targets, logits,
                                  static_cast<float>(1.0 / global_tokens), tokens, vocab_l, vocab_start},
                stream);
      for (Tensor done : {Tensor::global_row_max, Tensor::row_max, Tensor::sum_exp, Tensor::target_logit,
                          Tensor::token_loss})
        tensors_.release(mb, kHeadUnit, {done}, stream);
      // The gradient is written over the logits: it is the output projection's output gradient.
      tensors_.alias(mb, kHeadUnit, {Tensor::logits, Form::gradient}, kHeadUnit, {Tensor::logits});
      return;
    }
    default: throw std::logic_error("executor: not a loss action");
  }
}

void StageRuntime::pipeline(const Op& op, const OpBinding& b, int mb, cudaStream_t stream) {
  const std::int64_t h = shapes_.h, count = shapes_.tokens_local * h;
  // The rows each side's GPUs hold: a uniform pipeline's boundary pairs a GPU with its peer, each with its own rows;
  // an asymmetric plan's joins stages of other TP sizes, which hold the micro-batch's rows or their SP shares.
  const auto moves = [&](const Communicators::Boundary& boundary, void* buffer, bool sending) {
    const std::int64_t rows = boundary.micro_batch_rows ? shapes_.tokens : shapes_.tokens_local;
    for (const RowPiece& piece : boundary_pieces(rows, boundary.sides, boundary.position)) {
      void* at = static_cast<char*>(buffer) + piece.first_row * h * kBf16;
      if (sending)
        TWIN_NCCL_CHECK(ncclSend(at, piece.rows * h, ncclBfloat16, piece.peer, boundary.comm, stream));
      else
        TWIN_NCCL_CHECK(ncclRecv(at, piece.rows * h, ncclBfloat16, piece.peer, boundary.comm, stream));
    }
  };
  // The tensors a stage boundary moves, where a stage keeps them: a chunk's last layer's output and the gradient
  // that arrives for it; a chunk's received input and the gradient sent back for it. Each in one NCCL group.
  const auto last_unit = [&](int chunk) { return chunk_layers_.at(chunk).second - 1; };
  const auto send_activation = [&](int m, int chunk, const Communicators::Boundary& to) {
    moves(to, tensors_.get(m, last_unit(chunk), {Tensor::output}), true);
  };
  const auto recv_activation = [&](int m, int chunk, const Communicators::Boundary& from) {
    moves(from, tensors_.make(m, kReceivedUnit - chunk, {Tensor::output}, count * kBf16, stream), false);
  };
  const auto send_gradient = [&](int m, int chunk, const Communicators::Boundary& to) {
    moves(to, tensors_.get(m, kReceivedUnit - chunk, {Tensor::output, Form::next_norm_gradient}), true);
  };
  const auto recv_gradient = [&](int m, int chunk, const Communicators::Boundary& from) {
    moves(from, tensors_.make(m, last_unit(chunk), arriving_output_gradient(), count * kBf16, stream), false);
  };
  const bool send = b.action == Action::send_activation || b.action == Action::send_gradient ||
                    b.action == Action::send_strands;
  const Communicators::Boundary& boundary =
      send ? comms_.boundary(me_.pp, peer_stage(op)) : comms_.boundary(peer_stage(op), me_.pp);
  const auto grouped = [](const auto& transfer) {
    TWIN_NCCL_CHECK(ncclGroupStart());
    transfer();
    TWIN_NCCL_CHECK(ncclGroupEnd());
  };
  switch (b.action) {
    case Action::send_activation: return grouped([&] { send_activation(mb, op.chunk, boundary); });
    case Action::recv_activation: return grouped([&] { recv_activation(mb, op.chunk, boundary); });
    case Action::send_gradient:
      grouped([&] { send_gradient(mb, op.chunk, boundary); });
      tensors_.release_slot(mb, kReceivedUnit - op.chunk, stream);
      return;
    case Action::recv_gradient: return grouped([&] { recv_gradient(mb, op.chunk, boundary); });
    case Action::send_strands:
    case Action::recv_strands: {
      // The strands the transfer carries (the op says them): its forward strand's activation, then its backward
      // strand's gradient, in one group (NCCL matches a pair's sends and receives in order).
      const Strands& s = op.strands;
      const int forward = s.forward_micro_batch, backward = s.backward_micro_batch;
      TWIN_NCCL_CHECK(ncclGroupStart());
      if (forward >= 0 && send) send_activation(forward, s.forward_chunk, boundary);
      if (forward >= 0 && !send) recv_activation(forward, s.forward_chunk, boundary);
      if (backward >= 0 && send) send_gradient(backward, s.backward_chunk, boundary);
      if (backward >= 0 && !send) recv_gradient(backward, s.backward_chunk, boundary);
      TWIN_NCCL_CHECK(ncclGroupEnd());
      if (backward >= 0 && send) tensors_.release_slot(backward, kReceivedUnit - s.backward_chunk, stream);
      return;
    }
    default: throw std::logic_error("executor: not a pipeline action");
  }
}

}  // namespace twin::exec
