// An MoE layer's experts block as Megatron-LM's MoELayer runs it: the router, the shared experts, and the routed
// experts between the token dispatcher's dispatch and combine (megatron/core/transformer/moe/token_dispatcher.py).
// alltoall (MoEAlltoAllTokenDispatcher): each rank sorts its copies by expert and exchanges them with the EP group, the
// busiest rank's buffer what every rank waits for. allgather (MoEAllGatherTokenDispatcher): every rank gathers the
// EP group's tokens and routing, picks the copies for its own experts, and reduce-scatters the combined output back.
// The routed shapes are the emitter's layer's (RankShapes::moe_layer, from the routing model).
#include "strategies/lowering_linears.hpp"
#include "strategies/lowering_moe.hpp"
#include "strategies/megatron_expert_passes.hpp"

namespace twin::lowering {
namespace {

// An experts block's grouped GEMM: one product per local expert, the busiest expert's rows set when skewed.
// In FP8 where the layer runs its linears in FP8 (Transformer Engine's GroupedLinear).
Op expert_gemm(const Emitter& e, OpRole role, GemmPass pass, std::int64_t m, std::int64_t n, std::int64_t k,
               int count) {
  Op op = linear_gemm(e, role, pass, m, n, k);
  op.gemm.count = count;
  op.flops *= count;
  op.gemm.busiest = static_cast<std::int32_t>(e.shapes().moe_layer(e.layer()).busiest_expert_tokens);
  return op;
}

// Megatron-Core's eager kernels around the experts' fused ones (strategies/megatron_expert_passes.hpp), an elementwise
// op each where the shapes say the framework runs them: the clamp before the activation (its gradient after the
// activation's), the FC2 bias after FC2's forward GEMM (its gradients before FC2's).
void megatron_eager_pass(Emitter& e, bool runs, OpRole role, EagerPassBytes bytes, std::int64_t elements,
                         bool backward) {
  if (runs) e.emit(Emitter::moved(OpKind::elementwise, role, bytes.of(backward) * elements));
}

void megatron_glu_clamp(Emitter& e, std::int64_t elements, bool backward) {
  megatron_eager_pass(e, e.shapes().megatron_expert_clamp, OpRole::expert_activation, kMegatronGluClampBytes, elements,
                      backward);
}

void megatron_fc2_bias(Emitter& e, std::int64_t elements, bool backward) {
  megatron_eager_pass(e, e.shapes().megatron_expert_bias, OpRole::expert_fc2, kMegatronExpertBiasBytes, elements,
                      backward);
}

// The shared experts (Megatron's SharedExpertMLP): a dense MLP split over TP on the experts block's input, its
// FC1 column-parallel and FC2 row-parallel with SP's gather and scatter, beside the routed experts.
void shared_experts(Emitter& e, bool backward) {
  const RankShapes& s = e.shapes();
  if (s.shared_ffn == 0) return;
  const auto activation = Emitter::rows_cols(backward ? OpKind::activation_backward : OpKind::activation_forward,
                                             OpRole::shared_expert_activation, s.tokens, s.shared_ffn);
  if (!backward) {
    column_parallel_forward(e, OpRole::shared_expert_fc1, s.shared_fc1_width, s.h);
    e.emit(activation);
    row_parallel_forward(e, OpRole::shared_expert_fc2, s.h, s.shared_ffn);
    return;
  }
  row_parallel_backward(e, OpRole::shared_expert_fc2, s.h, s.shared_ffn);
  e.emit(activation);
  column_parallel_backward(e, OpRole::shared_expert_fc1, s.shared_fc1_width, s.h);
}

// The router's logits and top-k over the rows this rank holds. Under TP (MoE needs SP there) each TP rank routes its
// 1/tp of the sequence, under CP each CP rank its chunks; the load-balancing loss counts the whole sequence's copies
// per expert, summed over the TP x CP group as Megatron's router does (here over TP, then over CP).
void route(Emitter& e) {
  const RankShapes& s = e.shapes();
  Op router = Emitter::gemm(OpRole::router, GemmPass::forward, s.tokens_local, s.experts_total, s.h);
  router.kind = OpKind::moe_router;
  e.emit(router);
  if (s.tp > 1)
    e.emit(Emitter::collective(OpKind::all_reduce, OpRole::router, Stream::tp_comm, GroupKind::tensor, s.tp,
                               s.experts_total * 4));
  if (s.cp > 1)
    e.emit(Emitter::collective(OpKind::all_reduce, OpRole::router, Stream::cp_comm, GroupKind::context, s.cp,
                               s.experts_total * 4));
}

Op ep_collective(const RankShapes& s, OpKind kind, OpRole role, std::int64_t bytes) {
  return Emitter::collective(kind, role, Stream::ep_comm, GroupKind::expert, s.ep, bytes);
}

// flex (MoEFlexTokenDispatcher over DeepEP or HybridEP, megatron/core/transformer/moe/fused_a2a.py): the rank's
// tokens, each sent once per rank and node that holds one of its experts (the simulator prices the deduplication from
// the routing the op carries, sim/collectives.hpp); the busiest rank's share as the alltoall buffer has it. Its fused
// permute still sorts the copies by expert (Hybrid-EP's permute kernel after the dispatch), priced as the sort.
Op deduplicated_exchange(const RankShapes& s, const MoeLayerShapes& x, OpRole role) {
  Op op = ep_collective(s, OpKind::all_to_all, role, x.dispatch_bytes / s.top_k);
  op.dispatch_top_k = static_cast<std::uint16_t>(s.top_k);
  op.dispatch_experts = static_cast<std::uint16_t>(s.experts_total);
  return op;
}

// The alltoall dispatcher's exchange of the busiest rank's copies: under twin execute one block per (peer, local
// expert), each a send and a receive of its own in one NCCL group, so that they arrive grouped by local expert
// (executor/gpu/moe_block.cpp); under Megatron-Core one block per peer (RankShapes::exchange_blocks_per_peer).
Op expert_exchange(const RankShapes& s, const MoeLayerShapes& x, OpRole role) {
  Op op = ep_collective(s, OpKind::all_to_all, role, x.dispatch_bytes);
  op.blocks_per_peer = static_cast<std::uint16_t>(s.exchange_blocks_per_peer);
  return op;
}

// Expert TP around the alltoall dispatcher's exchange (MoEAlltoAllTokenDispatcher.dispatch_postprocess and
// combine_preprocess, megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM d98e8a64dd): towards
// the experts the copies received from EP, and their probabilities, are all-gathered over the expert-TP group (each
// expert's FC1 columns on every member need every member's copies); back from them the FC2 partial sums are
// reduce-scattered over it before the combine's all-to-all. The backward of a gather is a reduce-scatter and the
// other way round. Probabilities and the reduce-scatter in the router's dtype: the input's, bf16, under Megatron's
// default moe_router_dtype None (router.py, transformer_config.py).
void expert_tensor_exchange(Emitter& e, const MoeLayerShapes& x, OpRole role, bool gather) {
  const RankShapes& s = e.shapes();
  if (s.etp == 1) return;
  const std::int64_t tokens_bytes = s.etp * x.dispatch_bytes;  // bf16 rows of hidden from every member
  const std::int64_t probs_bytes = tokens_bytes / s.h;           // one bf16 probability per copy
  const OpKind kind = gather ? OpKind::all_gather : OpKind::reduce_scatter;
  e.emit(Emitter::collective(kind, role, Stream::ep_comm, GroupKind::expert_tensor, s.etp, tokens_bytes));
  if (role == OpRole::dispatch)  // the combine carries no probabilities
    e.emit(Emitter::collective(kind, role, Stream::ep_comm, GroupKind::expert_tensor, s.etp, probs_bytes));
}

// The EP group's tokens as the all-gather dispatcher gathers them: bf16 rows of hidden from every EP rank.
std::int64_t gathered_bytes(const RankShapes& s) { return s.ep * s.tokens_local * s.h * 2; }
// The copies this rank's experts hold, read and written once by a permute or unpermute (bf16 rows of hidden).
std::int64_t held_copies_bytes(const RankShapes& s, const MoeLayerShapes& x) {
  return 2 * x.expert_tokens * s.experts_local * s.h * 2;
}

// Dispatch (`role` dispatch) or combine (combine) forward, or its backward: the ops in the order they run.
// alltoall: the copies sorted by expert (so by the EP rank that holds it), then exchanged; they arrive grouped by
// local expert (received in place, no second sort); combine mirrors it. allgather: the EP group's tokens gathered
// (and its routing: fp32 probabilities and a bool map per token and expert), this rank's copies picked; combine
// scatters them back into the gathered rows and reduce-scatters those over EP. The backward of a gather is a
// reduce-scatter and the other way round.
void exchange(Emitter& e, const MoeLayerShapes& x, OpRole role, bool backward) {
  const RankShapes& s = e.shapes();
  const bool dispatch = role == OpRole::dispatch;
  const OpKind sort = dispatch ? OpKind::moe_permute : OpKind::moe_unpermute;
  switch (s.dispatcher) {
    case MoeTokenDispatcher::alltoall:
    case MoeTokenDispatcher::flex: {
      const Op local = Emitter::moved(sort, role, s.permute_bytes);
      // Forward dispatch and backward combine run towards the experts: sort, exchange, gather over expert TP.
      const bool towards_experts = dispatch != backward;
      if (towards_experts) e.emit(local);
      if (!towards_experts) expert_tensor_exchange(e, x, role, false);
      if (s.ep > 1) e.emit(s.dispatcher == MoeTokenDispatcher::flex ? deduplicated_exchange(s, x, role)
                                                                    : expert_exchange(s, x, role));
      if (towards_experts) expert_tensor_exchange(e, x, role, true);
      if (!towards_experts) e.emit(local);
      return;
    }
    case MoeTokenDispatcher::allgather: {
      const Op local = Emitter::moved(sort, role, held_copies_bytes(s, x));
      const bool gathers = dispatch != backward;  // forward dispatch and backward combine gather, the others reduce
      if (s.ep > 1 && gathers && dispatch)
        e.emit(ep_collective(s, OpKind::all_gather, role, s.ep * s.tokens_local * s.experts_total * 5));
      if (s.ep > 1 && gathers) e.emit(ep_collective(s, OpKind::all_gather, role, gathered_bytes(s)));
      e.emit(local);
      if (s.ep > 1 && !gathers) e.emit(ep_collective(s, OpKind::reduce_scatter, role, gathered_bytes(s)));
      return;
    }
  }
}

void moe_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  const MoeLayerShapes& x = s.moe_layer(e.layer());
  shared_experts(e, false);
  route(e);
  exchange(e, x, OpRole::dispatch, false);
  const int count = static_cast<int>(s.experts_local);
  cast_to_fp8(e, OpRole::expert_fc1, LinearTensor::input, x.expert_tokens * count, s.h);
  e.emit(expert_gemm(e, OpRole::expert_fc1, GemmPass::forward, x.expert_tokens, s.moe_fc1_width, s.h, count));
  megatron_glu_clamp(e, x.expert_tokens * count * s.moe_ffn, false);
  e.emit(Emitter::rows_cols(OpKind::activation_forward, OpRole::expert_activation, x.expert_tokens * count, s.moe_ffn));
  cast_to_fp8(e, OpRole::expert_fc2, LinearTensor::input, x.expert_tokens * count, s.moe_ffn);
  e.emit(expert_gemm(e, OpRole::expert_fc2, GemmPass::forward, x.expert_tokens, s.h, s.moe_ffn, count));
  megatron_fc2_bias(e, x.expert_tokens * count * s.h, false);
  exchange(e, x, OpRole::combine, false);
}

// Selective recompute (docs/SIMULATOR.md "Activation recompute"): `moe` runs the whole layer's forward again, its
// all-to-alls included, before its backward (moe_layer.py:701); `moe_act` the experts' activation before FC2's
// backward (experts.py:1019, the recompute hooked on FC2's output); `shared_experts` the shared experts' forward before
// their backward (moe_layer.py:517).
void moe_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  const MoeLayerShapes& x = s.moe_layer(e.layer());
  const int count = static_cast<int>(s.experts_local);
  if (s.recomputes(RecomputeModule::moe)) e.recompute([&] { moe_forward(e); });
  exchange(e, x, OpRole::combine, true);
  megatron_fc2_bias(e, x.expert_tokens * count * s.h, true);
  if (s.recomputes(RecomputeModule::moe_act) && !s.recomputes(RecomputeModule::moe))
    e.recompute([&] {
      megatron_glu_clamp(e, x.expert_tokens * count * s.moe_ffn, false);
      e.emit(Emitter::rows_cols(OpKind::activation_forward, OpRole::expert_activation, x.expert_tokens * count,
                                s.moe_ffn));
    });
  cast_to_fp8(e, OpRole::expert_fc2, LinearTensor::output_gradient, x.expert_tokens * count, s.h);
  const OpIndex fc2_dgrad =
      e.emit(expert_gemm(e, OpRole::expert_fc2, GemmPass::input_gradient, x.expert_tokens, s.moe_ffn, s.h, count));
  const OpIndex fc2_wgrad =
      e.emit(expert_gemm(e, OpRole::expert_fc2, GemmPass::weight_gradient, s.moe_ffn, s.h, x.expert_tokens, count));
  accumulate_gradient(e, fc2_wgrad, OpRole::expert_fc2, count * s.moe_ffn * s.h);
  e.chain = fc2_dgrad;
  e.emit(Emitter::rows_cols(OpKind::activation_backward, OpRole::expert_activation, x.expert_tokens * count, s.moe_ffn));
  megatron_glu_clamp(e, x.expert_tokens * count * s.moe_ffn, true);
  cast_to_fp8(e, OpRole::expert_fc1, LinearTensor::output_gradient, x.expert_tokens * count, s.moe_fc1_width);
  const OpIndex fc1_dgrad = e.emit(
      expert_gemm(e, OpRole::expert_fc1, GemmPass::input_gradient, x.expert_tokens, s.h, s.moe_fc1_width, count));
  const OpIndex fc1_wgrad = e.emit(
      expert_gemm(e, OpRole::expert_fc1, GemmPass::weight_gradient, s.h, s.moe_fc1_width, x.expert_tokens, count));
  accumulate_gradient(e, fc1_wgrad, OpRole::expert_fc1, count * s.h * s.moe_fc1_width);
  e.chain = fc1_dgrad;
  exchange(e, x, OpRole::dispatch, true);
  const OpIndex router_dgrad =
      e.emit(Emitter::gemm(OpRole::router, GemmPass::input_gradient, s.tokens_local, s.h, s.experts_total));
  const OpIndex router_wgrad =
      e.emit(Emitter::gemm(OpRole::router, GemmPass::weight_gradient, s.h, s.experts_total, s.tokens_local));
  accumulate_gradient(e, router_wgrad, OpRole::router, s.h * s.experts_total);
  e.chain = router_dgrad;
  if (s.recomputes(RecomputeModule::shared_experts) && !s.recomputes(RecomputeModule::moe))
    e.recompute([&] { shared_experts(e, false); });
  shared_experts(e, true);
}

}  // namespace

void emit_experts(Emitter& e, bool backward) { backward ? moe_backward(e) : moe_forward(e); }

}  // namespace twin::lowering
