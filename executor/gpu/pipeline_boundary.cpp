// A boundary's transfers: a uniform pipeline's pairs a GPU with its peer, each with its own rows; an asymmetric
// plan's joins stages of other TP sizes, which hold the micro-batch's rows or their SP shares
// (executor/stage_boundary.hpp).
#include "executor/gpu/pipeline_boundary.hpp"

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {
namespace {

using kernels::bf16;
constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;

// One transfer in one NCCL group.
template <typename Transfer>
void grouped(const Transfer& transfer) {
  TWIN_NCCL_CHECK(ncclGroupStart());
  transfer();
  TWIN_NCCL_CHECK(ncclGroupEnd());
}

}  // namespace

const Communicators::Boundary& PipelineBoundary::boundary(const Op& op, bool sending) const {
  const int peer = stage_.graph.classes.at(static_cast<std::size_t>(op.peer)).stage;
  const int me = stage_.layout.me().pp;
  return sending ? stage_.comms.boundary(me, peer) : stage_.comms.boundary(peer, me);
}

void PipelineBoundary::move_rows(const Communicators::Boundary& boundary, void* buffer, bool sending, int unit,
                                 cudaStream_t stream) {
  const lowering::RankShapes& shapes = stage_.layout.layout(unit).shapes;
  const std::int64_t rows = boundary.micro_batch_rows ? shapes.tokens : shapes.tokens_local;
  for (const RowPiece& piece : boundary_pieces(rows, boundary.sides, boundary.position)) {
    void* at = static_cast<char*>(buffer) + piece.first_row * shapes.h * kBf16;
    if (sending)
      TWIN_NCCL_CHECK(ncclSend(at, piece.rows * shapes.h, ncclBfloat16, piece.peer, boundary.comm, stream));
    else
      TWIN_NCCL_CHECK(ncclRecv(at, piece.rows * shapes.h, ncclBfloat16, piece.peer, boundary.comm, stream));
  }
}

void PipelineBoundary::activation_out(int mb, int chunk, const Communicators::Boundary& to, cudaStream_t stream) {
  const int last = stage_.layout.last_unit(chunk);
  move_rows(to, stage_.tensors.get(mb, last, {Tensor::output}), true, last, stream);
}

// The received input is the chunk's first layer's: its rows.
void PipelineBoundary::activation_in(int mb, int chunk, const Communicators::Boundary& from, cudaStream_t stream) {
  const int first = stage_.layout.first_unit(chunk);
  const lowering::RankShapes& shapes = stage_.layout.layout(first).shapes;
  move_rows(from,
            stage_.tensors.make(mb, kReceivedUnit - chunk, {Tensor::output}, shapes.tokens_local * shapes.h * kBf16,
                                stream),
            false, first, stream);
}

void PipelineBoundary::gradient_out(int mb, int chunk, const Communicators::Boundary& to, cudaStream_t stream) {
  move_rows(to, stage_.tensors.get(mb, kReceivedUnit - chunk, {Tensor::output, Form::next_norm_gradient}), true,
            stage_.layout.first_unit(chunk), stream);
}

void PipelineBoundary::gradient_in(int mb, int chunk, const Communicators::Boundary& from, cudaStream_t stream) {
  const int last = stage_.layout.last_unit(chunk);
  const lowering::RankShapes& shapes = stage_.layout.layout(last).shapes;
  move_rows(from,
            stage_.tensors.make(mb, last, stage_.layout.arriving_output_gradient(),
                                shapes.tokens_local * shapes.h * kBf16, stream),
            false, last, stream);
}

void PipelineBoundary::send_activation(const OpPass& p) {
  grouped([&] { activation_out(p.mb, p.op.chunk, boundary(p.op, true), p.stream); });
}

void PipelineBoundary::recv_activation(const OpPass& p) {
  grouped([&] { activation_in(p.mb, p.op.chunk, boundary(p.op, false), p.stream); });
}

void PipelineBoundary::send_gradient(const OpPass& p) {
  grouped([&] { gradient_out(p.mb, p.op.chunk, boundary(p.op, true), p.stream); });
  stage_.tensors.release_slot(p.mb, kReceivedUnit - p.op.chunk, p.stream);
}

void PipelineBoundary::recv_gradient(const OpPass& p) {
  grouped([&] { gradient_in(p.mb, p.op.chunk, boundary(p.op, false), p.stream); });
}

// The strands the transfer carries (the op says them): its forward strand's activation, then its backward strand's
// gradient, in one group (NCCL matches a pair's sends and receives in order).
void PipelineBoundary::send_strands(const OpPass& p) {
  const Strands& s = p.op.strands;
  const Communicators::Boundary& to = boundary(p.op, true);
  grouped([&] {
    if (s.forward_micro_batch >= 0) activation_out(s.forward_micro_batch, s.forward_chunk, to, p.stream);
    if (s.backward_micro_batch >= 0) gradient_out(s.backward_micro_batch, s.backward_chunk, to, p.stream);
  });
  if (s.backward_micro_batch >= 0)
    stage_.tensors.release_slot(s.backward_micro_batch, kReceivedUnit - s.backward_chunk, p.stream);
}

void PipelineBoundary::recv_strands(const OpPass& p) {
  const Strands& s = p.op.strands;
  const Communicators::Boundary& from = boundary(p.op, false);
  grouped([&] {
    if (s.forward_micro_batch >= 0) activation_in(s.forward_micro_batch, s.forward_chunk, from, p.stream);
    if (s.backward_micro_batch >= 0) gradient_in(s.backward_micro_batch, s.backward_chunk, from, p.stream);
  });
}

}  // namespace twin::exec
