// The interpreter's handler of context parallelism's ring (Megatron's cp_comm_type p2p): the graph's ring ops, each
// a step of one layer's attention (Op::ring_step). The blocks' arithmetic is gpu/ring_attention.hpp's; this handler
// moves the blocks and owns each (micro-batch, layer, pass)'s ring from its first op to its last. Forward, exchange
// k sends the key-value block of step k to the next CP rank and receives step k + 1's from the previous one; block
// k runs against it and its merge op folds it into the output. Backward, exchange k also carries the key-value
// gradient one step behind: what the ranks before added to the block of step k - 1, plus this rank's share of it
// (added by the gradient-add op before), which the next rank needs for its step k; exchange cp brings each rank's
// completed gradient home, into the K | V columns of dQKV. Every buffer is freed on a stream that has waited, by
// the graph's edges, for every op that reads it. One public function per action: the runtime's dispatch names each.
#pragma once
#include <map>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>

#include "core/op_graph.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "executor/op_binding.hpp"
#include "gpu/attention.hpp"
#include "gpu/ring_attention.hpp"
#include "strategies/lowering_emitter.hpp"

namespace twin::exec {

// What the ring reads from the stage that runs it.
struct RingStage {
  const lowering::RankShapes& shapes;
  int cp_rank = 0;  // this GPU's place in its context group
  Communicators& comms;
  TensorStore& tensors;
  gpu::Attention& attention;
};

class ContextRingRun {
 public:
  explicit ContextRingRun(const RingStage& stage) : stage_(stage) {}

  void exchange(const OpPass& p);  // ring_exchange and ring_exchange_backward
  void attention_forward(const OpPass& p);
  void merge(const OpPass& p);
  void gradient_add(const OpPass& p);
  void attention_backward(const OpPass& p);

 private:
  // Per step: the key-value block received for it (kv), this rank's dK | dV of its block (dkv), the gradient
  // received in its exchange (carried); the forward's fp32 output and a block's own result; the backward's fp32 dQ
  // and a block's dQ; the rank's own block packed for its backward.
  struct Ring {
    std::vector<void*> kv, dkv, carried;
    void *o_acc = nullptr, *o_scratch = nullptr, *lse_scratch = nullptr;
    void *dq_acc = nullptr, *dq_scratch = nullptr, *own_kv = nullptr;
  };
  using Key = std::tuple<int, int, bool>;  // (micro-batch, unit, backward)
  Ring& ring(const OpPass& p, bool backward);
  gpu::RingShape shape() const;
  const __nv_bfloat16* own_qkv(const OpPass& p);
  // Sends `out` to the next CP rank and receives `in` from the previous one (inside the caller's NCCL group).
  void send_on(void* out, void* in, std::size_t bytes, cudaStream_t stream);

  RingStage stage_;
  std::map<Key, Ring> rings_;
};

}  // namespace twin::exec
