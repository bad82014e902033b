// The ring's steps, one function per action of the ring.
#include "executor/gpu/context_ring_run.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "core/layer.hpp"
#include "strategies/context_ring.hpp"
#include "executor/gpu/kernel_launch.hpp"

namespace twin::exec {
namespace {

using kernels::bf16;
constexpr std::size_t kBf16 = sizeof(bf16);

void* allocate(std::size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
  return p;
}

void free_on(void*& p, cudaStream_t stream) {
  if (p) TWIN_CUDA_CHECK(cudaFreeAsync(p, stream));
  p = nullptr;
}

const layer::Block& attention() { return layer::block_of(OpRole::core_attention); }
Act qkv_name() { return {attention().input}; }
Act out_name() { return {attention().output}; }
Act stats_name() { return {attention().stats}; }
Act d_qkv_name() { return {attention().input, Form::gradient}; }
Act d_out_name() { return {attention().output, Form::gradient}; }

}  // namespace

gpu::RingShape ContextRingRun::shape() const {
  const lowering::RankShapes& s = stage_.shapes;
  return {s.b, s.s, static_cast<int>(s.heads), static_cast<int>(s.groups), static_cast<int>(s.d), s.qkv_width};
}

ContextRingRun::Ring& ContextRingRun::ring(const OpPass& p, bool backward) {
  Ring& ring = rings_[{p.mb, p.unit, backward}];
  const int cp = stage_.shapes.cp;
  if (ring.kv.empty()) ring = Ring{std::vector<void*>(cp + 1), std::vector<void*>(cp + 1), std::vector<void*>(cp + 1)};
  return ring;
}

const bf16* ContextRingRun::own_qkv(const OpPass& p) {
  return static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, qkv_name()));
}

void ContextRingRun::send_on(void* out, void* in, std::size_t bytes, cudaStream_t stream) {
  const int cp = stage_.shapes.cp, me = stage_.cp_rank;
  ncclComm_t comm = stage_.comms.context();
  TWIN_NCCL_CHECK(ncclSend(out, bytes / kBf16, ncclBfloat16, (me + 1) % cp, comm, stream));
  TWIN_NCCL_CHECK(ncclRecv(in, bytes / kBf16, ncclBfloat16, (me + cp - 1) % cp, comm, stream));
}

void ContextRingRun::exchange(const OpPass& p) {
  const lowering::RankShapes& s = stage_.shapes;
  const gpu::RingShape shape = this->shape();
  const int cp = s.cp, step = p.op.ring_step;
  const bool backward = p.binding.action == Action::ring_exchange_backward;
  const std::size_t kv_bytes = static_cast<std::size_t>(gpu::ring_kv_bytes(shape));
  const std::int64_t kv_width = shape.kv_width();
  Ring& ring = this->ring(p, backward);
  if (step == 0) {
    ring.kv[0] = allocate(kv_bytes, p.stream);
    gpu::pack_ring_kv(shape, own_qkv(p), s.qkv_width, static_cast<bf16*>(ring.kv[0]), p.stream);
  }
  const RingPayload payload = ring_payload(cp, step, backward);
  // The graph priced this exchange: what it carries must be what it sends.
  if (p.op.bytes != payload.blocks() * static_cast<Bytes>(kv_bytes))
    throw std::logic_error(fmt::format("executor: {} step {} carries {} bytes in the graph, {} here", op_name(p.op),
                                       step, p.op.bytes, payload.blocks() * kv_bytes));
  // Backward: the gradient of the key-value block of step - 1 with this rank's share in it: at step 1 its own
  // share alone (the block is its own), later the one received with the share added (gradient_add).
  void** gradient = payload.gradient ? (step == 1 ? &ring.dkv[0] : &ring.carried[step - 1]) : nullptr;
  TWIN_NCCL_CHECK(ncclGroupStart());
  if (payload.key_values) send_on(ring.kv[step], ring.kv[step + 1] = allocate(kv_bytes, p.stream), kv_bytes, p.stream);
  if (gradient) send_on(*gradient, ring.carried[step] = allocate(kv_bytes, p.stream), kv_bytes, p.stream);
  TWIN_NCCL_CHECK(ncclGroupEnd());
  if (gradient) free_on(*gradient, p.stream);
  if (backward && step == cp) {  // home: this rank's completed dK | dV into dQKV's K | V columns
    auto* d_qkv = static_cast<bf16*>(stage_.tensors.get(p.mb, p.unit, d_qkv_name()));
    kernels::copy_bf16_rows(d_qkv + shape.q_width(), s.qkv_width, static_cast<const bf16*>(ring.carried[cp]),
                            2 * kv_width, shape.tokens(), 2 * kv_width, p.stream);
    free_on(ring.carried[cp], p.stream);
    rings_.erase({p.mb, p.unit, backward});
  }
}

void ContextRingRun::attention_forward(const OpPass& p) {
  const lowering::RankShapes& s = stage_.shapes;
  const gpu::RingShape shape = this->shape();
  const int cp = s.cp, step = p.op.ring_step;
  const std::int64_t tokens = shape.tokens(), q_width = shape.q_width(), kv_width = shape.kv_width();
  Ring& ring = this->ring(p, false);
  const std::size_t stats_bytes = static_cast<std::size_t>(s.b * s.heads * s.s) * sizeof(float);
  auto* lse = static_cast<float*>(stage_.tensors.make(p.mb, p.unit, stats_name(), stats_bytes, p.stream));
  if (step == 0) {
    ring.o_acc = allocate(static_cast<std::size_t>(tokens * q_width) * sizeof(float), p.stream);
    ring.o_scratch = allocate(static_cast<std::size_t>(tokens * q_width) * kBf16, p.stream);
    ring.lse_scratch = allocate(stats_bytes, p.stream);
  } else {
    free_on(ring.kv[step - 1], p.stream);  // its exchange, which this block waited for, has passed it on
  }
  const bf16* q = own_qkv(p);
  const bf16* k = step == 0 ? q + q_width : static_cast<const bf16*>(ring.kv[step]);
  gpu::ring_forward_block(stage_.attention, gpu::ring_block(stage_.cp_rank, step, cp), shape, q, k, k + kv_width,
                          step == 0 ? s.qkv_width : 2 * kv_width, lse, static_cast<bf16*>(ring.o_scratch),
                          static_cast<float*>(ring.lse_scratch), p.stream);
  if (step == cp - 1) free_on(ring.kv[step], p.stream);
}

void ContextRingRun::merge(const OpPass& p) {
  const gpu::RingShape shape = this->shape();
  const int cp = stage_.shapes.cp, step = p.op.ring_step;
  const std::int64_t tokens = shape.tokens(), q_width = shape.q_width();
  Ring& ring = this->ring(p, false);
  auto* lse = static_cast<float*>(stage_.tensors.get(p.mb, p.unit, stats_name()));
  gpu::ring_merge_block(gpu::ring_block(stage_.cp_rank, step, cp), shape, static_cast<const bf16*>(ring.o_scratch),
                        static_cast<const float*>(ring.lse_scratch), static_cast<float*>(ring.o_acc), lse, p.stream);
  if (step == cp - 1) {  // the output, in bf16 as attention's
    auto* o = static_cast<bf16*>(
        stage_.tensors.make(p.mb, p.unit, out_name(), static_cast<std::size_t>(tokens * q_width) * kBf16, p.stream));
    kernels::f32_to_bf16_rows(static_cast<const float*>(ring.o_acc), o, tokens, q_width, q_width, p.stream);
    for (void** done : {&ring.o_acc, &ring.o_scratch, &ring.lse_scratch}) free_on(*done, p.stream);
    rings_.erase({p.mb, p.unit, false});
  }
}

void ContextRingRun::gradient_add(const OpPass& p) {  // exchange step - 1 brought it; this rank's share joins it
  const gpu::RingShape shape = this->shape();
  const int step = p.op.ring_step;
  Ring& ring = this->ring(p, true);
  launch_op(p.op, p.binding,
            gpu::Elementwise{static_cast<const bf16*>(ring.carried[step - 1]),
                             static_cast<const bf16*>(ring.dkv[step - 1]), static_cast<bf16*>(ring.carried[step - 1]),
                             shape.tokens() * 2 * shape.kv_width()},
            p.stream);
  free_on(ring.dkv[step - 1], p.stream);
}

void ContextRingRun::attention_backward(const OpPass& p) {
  const lowering::RankShapes& s = stage_.shapes;
  const gpu::RingShape shape = this->shape();
  const int cp = s.cp, step = p.op.ring_step;
  const std::size_t kv_bytes = static_cast<std::size_t>(gpu::ring_kv_bytes(shape));
  const std::int64_t tokens = shape.tokens(), q_width = shape.q_width();
  Ring& ring = this->ring(p, true);
  const gpu::RingBlock block = gpu::ring_block(stage_.cp_rank, step, cp);
  const bf16* kv = nullptr;
  if (step == 0) {
    stage_.tensors.make(p.mb, p.unit, d_qkv_name(), static_cast<std::size_t>(tokens * s.qkv_width) * kBf16, p.stream);
    const std::size_t dq_bytes = static_cast<std::size_t>(tokens * q_width) * sizeof(float);
    ring.dq_acc = allocate(dq_bytes, p.stream);
    TWIN_CUDA_CHECK(cudaMemsetAsync(ring.dq_acc, 0, dq_bytes, p.stream));
    ring.dq_scratch = allocate(static_cast<std::size_t>(tokens * s.qkv_width) * kBf16, p.stream);
    // Its own block packed on this stream: the exchange's copy is on the ring's stream, which this block does
    // not wait for.
    ring.own_kv = allocate(kv_bytes, p.stream);
    gpu::pack_ring_kv(shape, own_qkv(p), s.qkv_width, static_cast<bf16*>(ring.own_kv), p.stream);
    kv = static_cast<const bf16*>(ring.own_kv);
  } else {
    free_on(ring.kv[step - 1], p.stream);
    kv = static_cast<const bf16*>(ring.kv[step]);
  }
  ring.dkv[step] = allocate(kv_bytes, p.stream);
  gpu::ring_backward_block(stage_.attention, block, shape, own_qkv(p), kv, static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, out_name())),
                           static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, d_out_name())),
                           static_cast<const float*>(stage_.tensors.get(p.mb, p.unit, stats_name())), static_cast<float*>(ring.dq_acc),
                           static_cast<bf16*>(ring.dq_scratch), static_cast<bf16*>(ring.dkv[step]), p.stream);
  if (step == 0) free_on(ring.own_kv, p.stream);
  if (step == cp - 1) {
    auto* d_qkv = static_cast<bf16*>(stage_.tensors.get(p.mb, p.unit, d_qkv_name()));
    kernels::f32_to_bf16_rows(static_cast<const float*>(ring.dq_acc), d_qkv, tokens, q_width, s.qkv_width, p.stream);
    for (void** done : {&ring.kv[step], &ring.dq_acc, &ring.dq_scratch}) free_on(*done, p.stream);
    for (Act done : {qkv_name(), out_name(), stats_name(), d_out_name()}) stage_.tensors.release(p.mb, p.unit, done, p.stream);
  }
}

}  // namespace twin::exec
