// Context parallelism's ring (Megatron's cp_comm_type p2p): the graph's ring ops, each a step of one layer's
// attention (Op::ring_step). The blocks' arithmetic is gpu/ring_attention.hpp's; this file moves the blocks.
// Forward, exchange k sends the key-value block of step k to the next CP rank and receives step k + 1's from
// the previous one; block k runs against it and its merge op folds it into the output. Backward, exchange k also
// carries the key-value gradient one step behind: what the ranks before added to the block of step k - 1, plus
// this rank's share of it (added by the gradient-add op before), which the next rank needs for its step k;
// exchange cp brings each rank's completed gradient home, into the K | V columns of dQKV. Every buffer is freed on a stream that has waited, by the graph's
// edges, for every op that reads it.
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "gpu/ring_attention.hpp"
#include "core/layer.hpp"
#include "strategies/context_ring.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/stage_runtime.hpp"

namespace twin::exec {
namespace {

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

}  // namespace

void StageRuntime::context_ring(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const lowering::RankShapes& s = shapes_;
  const int cp = s.cp, step = op.ring_step;
  const bool backward = b.action == Action::ring_attention_backward || b.action == Action::ring_exchange_backward ||
                        b.action == Action::ring_gradient_add;
  const gpu::RingShape shape{s.b, s.s, static_cast<int>(s.heads), static_cast<int>(s.groups), static_cast<int>(s.d),
                             s.qkv_width};
  const std::size_t kv_bytes = static_cast<std::size_t>(gpu::ring_kv_bytes(shape));
  const std::int64_t tokens = shape.tokens(), q_width = shape.q_width(), kv_width = shape.kv_width();
  const layer::Block& attention = layer::block_of(OpRole::core_attention);
  const Act qkv_name{attention.input}, out_name{attention.output}, stats_name{attention.stats};
  const Act d_qkv_name{attention.input, Form::gradient}, d_out_name{attention.output, Form::gradient};
  Ring& ring = rings_[{mb, unit, backward}];
  if (ring.kv.empty()) ring = Ring{std::vector<void*>(cp + 1), std::vector<void*>(cp + 1), std::vector<void*>(cp + 1)};
  ncclComm_t comm = comms_.context();
  const int next = (me_.cp + 1) % cp, previous = (me_.cp + cp - 1) % cp;
  const auto exchange = [&](void* out, void* in, std::size_t bytes) {
    TWIN_NCCL_CHECK(ncclSend(out, bytes / kBf16, ncclBfloat16, next, comm, stream));
    TWIN_NCCL_CHECK(ncclRecv(in, bytes / kBf16, ncclBfloat16, previous, comm, stream));
  };
  const auto own_qkv = [&] { return static_cast<const bf16*>(tensors_.get(mb, unit, qkv_name)); };

  switch (b.action) {
    case Action::ring_exchange:
    case Action::ring_exchange_backward: {
      if (step == 0) {
        ring.kv[0] = allocate(kv_bytes, stream);
        gpu::pack_ring_kv(shape, own_qkv(), s.qkv_width, static_cast<bf16*>(ring.kv[0]), stream);
      }
      const RingPayload payload = ring_payload(cp, step, backward);
      // The graph priced this exchange: what it carries must be what it sends.
      if (op.bytes != payload.blocks() * static_cast<Bytes>(kv_bytes))
        throw std::logic_error(fmt::format("executor: {} step {} carries {} bytes in the graph, {} here", op_name(op),
                                           step, op.bytes, payload.blocks() * kv_bytes));
      // Backward: the gradient of the key-value block of step - 1 with this rank's share in it: at step 1 its own
      // share alone (the block is its own), later the one received with the share added (ring_gradient_add).
      void** gradient = payload.gradient ? (step == 1 ? &ring.dkv[0] : &ring.carried[step - 1]) : nullptr;
      TWIN_NCCL_CHECK(ncclGroupStart());
      if (payload.key_values) exchange(ring.kv[step], ring.kv[step + 1] = allocate(kv_bytes, stream), kv_bytes);
      if (gradient) exchange(*gradient, ring.carried[step] = allocate(kv_bytes, stream), kv_bytes);
      TWIN_NCCL_CHECK(ncclGroupEnd());
      if (gradient) free_on(*gradient, stream);
      if (backward && step == cp) {  // home: this rank's completed dK | dV into dQKV's K | V columns
        auto* d_qkv = static_cast<bf16*>(tensors_.get(mb, unit, d_qkv_name));
        kernels::copy_bf16_rows(d_qkv + q_width, s.qkv_width, static_cast<const bf16*>(ring.carried[cp]), 2 * kv_width,
                                tokens, 2 * kv_width, stream);
        free_on(ring.carried[cp], stream);
        rings_.erase({mb, unit, backward});
      }
      return;
    }
    case Action::ring_attention_forward: {
      const std::size_t stats_bytes = static_cast<std::size_t>(s.b * s.heads * s.s) * sizeof(float);
      auto* lse = static_cast<float*>(tensors_.make(mb, unit, stats_name, stats_bytes, stream));
      if (step == 0) {
        ring.o_acc = allocate(static_cast<std::size_t>(tokens * q_width) * sizeof(float), stream);
        ring.o_scratch = allocate(static_cast<std::size_t>(tokens * q_width) * kBf16, stream);
        ring.lse_scratch = allocate(stats_bytes, stream);
      } else {
        free_on(ring.kv[step - 1], stream);  // its exchange, which this block waited for, has passed it on
      }
      const bf16* q = own_qkv();
      const bf16* k = step == 0 ? q + q_width : static_cast<const bf16*>(ring.kv[step]);
      gpu::ring_forward_block(*attention_, gpu::ring_block(me_.cp, step, cp), shape, q, k, k + kv_width,
                              step == 0 ? s.qkv_width : 2 * kv_width, lse, static_cast<bf16*>(ring.o_scratch),
                              static_cast<float*>(ring.lse_scratch), stream);
      if (step == cp - 1) free_on(ring.kv[step], stream);
      return;
    }
    case Action::ring_merge: {
      auto* lse = static_cast<float*>(tensors_.get(mb, unit, stats_name));
      gpu::ring_merge_block(gpu::ring_block(me_.cp, step, cp), shape, static_cast<const bf16*>(ring.o_scratch),
                            static_cast<const float*>(ring.lse_scratch), static_cast<float*>(ring.o_acc), lse, stream);
      if (step == cp - 1) {  // the output, in bf16 as attention's
        auto* o = static_cast<bf16*>(tensors_.make(mb, unit, out_name, static_cast<std::size_t>(tokens * q_width) * kBf16, stream));
        kernels::f32_to_bf16_rows(static_cast<const float*>(ring.o_acc), o, tokens, q_width, q_width, stream);
        for (void** done : {&ring.o_acc, &ring.o_scratch, &ring.lse_scratch}) free_on(*done, stream);
        rings_.erase({mb, unit, backward});
      }
      return;
    }
    case Action::ring_gradient_add: {  // exchange step - 1 brought it; this rank's share of that block joins it
      launch_op(op, b,
                gpu::Elementwise{static_cast<const bf16*>(ring.carried[step - 1]),
                                 static_cast<const bf16*>(ring.dkv[step - 1]), static_cast<bf16*>(ring.carried[step - 1]),
                                 tokens * 2 * kv_width},
                stream);
      free_on(ring.dkv[step - 1], stream);
      return;
    }
    case Action::ring_attention_backward: {
      const gpu::RingBlock block = gpu::ring_block(me_.cp, step, cp);
      const bf16* kv = nullptr;
      if (step == 0) {
        tensors_.make(mb, unit, d_qkv_name, static_cast<std::size_t>(tokens * s.qkv_width) * kBf16, stream);
        const std::size_t dq_bytes = static_cast<std::size_t>(tokens * q_width) * sizeof(float);
        ring.dq_acc = allocate(dq_bytes, stream);
        TWIN_CUDA_CHECK(cudaMemsetAsync(ring.dq_acc, 0, dq_bytes, stream));
        ring.dq_scratch = allocate(static_cast<std::size_t>(tokens * s.qkv_width) * kBf16, stream);
        // Its own block packed on this stream: the exchange's copy is on the ring's stream, which this block does
        // not wait for.
        ring.own_kv = allocate(kv_bytes, stream);
        gpu::pack_ring_kv(shape, own_qkv(), s.qkv_width, static_cast<bf16*>(ring.own_kv), stream);
        kv = static_cast<const bf16*>(ring.own_kv);
      } else {
        free_on(ring.kv[step - 1], stream);
        kv = static_cast<const bf16*>(ring.kv[step]);
      }
      ring.dkv[step] = allocate(kv_bytes, stream);
      gpu::ring_backward_block(*attention_, block, shape, own_qkv(), kv, static_cast<const bf16*>(tensors_.get(mb, unit, out_name)),
                               static_cast<const bf16*>(tensors_.get(mb, unit, d_out_name)),
                               static_cast<const float*>(tensors_.get(mb, unit, stats_name)), static_cast<float*>(ring.dq_acc),
                               static_cast<bf16*>(ring.dq_scratch), static_cast<bf16*>(ring.dkv[step]), stream);
      if (step == 0) free_on(ring.own_kv, stream);
      if (step == cp - 1) {
        auto* d_qkv = static_cast<bf16*>(tensors_.get(mb, unit, d_qkv_name));
        kernels::f32_to_bf16_rows(static_cast<const float*>(ring.dq_acc), d_qkv, tokens, q_width, s.qkv_width, stream);
        for (void** done : {&ring.kv[step], &ring.dq_acc, &ring.dq_scratch}) free_on(*done, stream);
        for (Act done : {qkv_name, out_name, stats_name, d_out_name}) tensors_.release(mb, unit, done, stream);
      }
      return;
    }
    default: throw std::logic_error("executor: not a context-parallel ring action");
  }
}

}  // namespace twin::exec
