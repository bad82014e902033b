// The experts block's ops, in the graph's order: forward router, dispatch (and its exchange under EP), the experts'
// fc1, activation and fc2, the combine (after the exchange back); backward the same in reverse.
#include <vector>

#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/moe_block.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {
namespace {

using layer::Tensor;

template <class GroupOf>
std::vector<GemmGroup> per_expert(const std::vector<std::int64_t>& counts, GroupOf&& group_of) {
  std::vector<GemmGroup> groups;
  std::int64_t first = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) {
    groups.push_back(group_of(static_cast<std::int64_t>(e), first, counts[e]));
    first += counts[e];
  }
  return groups;
}

}  // namespace

void MoeBlock::router_forward(const OpPass& p) {
  const lowering::RankShapes& s = stage_.shapes;
  const std::int64_t tokens = s.tokens_local, experts = s.experts_total, routed = tokens * s.top_k;
  TensorStore& t = stage_.tensors;
  counts_sequence_shards_[{p.mb, p.unit}] = 1;  // this (or a recomputed) pass's counts, summed over nothing yet
  bf16* logits = new_bf16(p, Tensor::router_logits, Form::value, tokens * experts);
  router_logits(p, weight(p), bf(p, Tensor::mlp_norm_out), logits);
  if (forced_balance_)  // the router's product is computed, then replaced, as Megatron's apply_random_logits does
    kernels::moe_random_logits(logits, tokens * experts, forced_logits_seed(), forced_logits_subsequence(p), p.stream);
  auto* probs = static_cast<float*>(t.make(p.mb, p.unit, {Tensor::router_probs}, tokens * experts * 4, p.stream));
  auto* choice = static_cast<std::int32_t*>(t.make(p.mb, p.unit, {Tensor::expert_choice}, routed * 4, p.stream));
  auto* combine = static_cast<float*>(t.make(p.mb, p.unit, {Tensor::combine_weight}, routed * 4, p.stream));
  kernels::moe_router_topk(logits, probs, choice, combine, tokens, static_cast<int>(experts), s.top_k,
                           scoring(p.unit), p.stream);
  done(p, {{Tensor::router_logits}});
  auto* order = static_cast<std::int32_t*>(t.make(p.mb, p.unit, {Tensor::expert_order}, routed * 4, p.stream));
  auto* row = static_cast<std::int32_t*>(t.make(p.mb, p.unit, {Tensor::routed_row}, routed * 4, p.stream));
  auto* counts = static_cast<std::int32_t*>(t.make(p.mb, p.unit, {Tensor::expert_counts}, experts * 4, p.stream));
  kernels::moe_sort_by_expert(choice, routed, static_cast<int>(experts), order, row, counts,
                              p.scratch.moe_sort_workspace, sort_workspace_bytes_, p.stream);
  if (capacity_) drop_beyond_capacity(p);  // queued before the host waits for the counts
  const std::vector<std::int64_t> host = counts_on_host(counts, experts, p.stream);
  // Under EP the dispatch learns the experts' rows; a capacity (one EP rank) keeps each expert's first copies by
  // weight. The load-balancing loss counts the routed copies, as Megatron's (compute_routing_scores_for_aux_loss).
  if (capacity_) expert_counts_[{p.mb, p.unit}] = kept_rows(host);
  else if (s.ep == 1) expert_counts_[{p.mb, p.unit}] = host;
  // A recomputed forward routes the same tokens the same way. The load-balancing loss's value is added with
  // its gradient (the combine's backward), where the sequence's counts are known under SP.
  if (!p.op.recomputed) loads_.push_back({iteration_, p.mb, p.unit, host});
}

void MoeBlock::routing_counts_reduce(const OpPass& p) {
  // Over TP, then over CP: each sum starts from what the one before it in this pass summed.
  const std::int64_t experts = stage_.shapes.experts_total;
  int& shards = counts_sequence_shards_.at({p.mb, p.unit});
  const auto* counts = static_cast<const std::int32_t*>(tensor(p, Tensor::expert_counts, shards > 1 ? Form::reduced : Form::value));
  auto* sequence_counts =
      static_cast<std::int32_t*>(stage_.tensors.make(p.mb, p.unit, {Tensor::expert_counts, Form::reduced}, experts * 4, p.stream));
  TWIN_NCCL_CHECK(ncclAllReduce(counts, sequence_counts, experts, ncclInt32, ncclSum,
                                p.op.group == GroupKind::context ? stage_.comms.context() : stage_.comms.tensor(),
                                p.stream));
  shards *= p.op.group_size;
}

void MoeBlock::dispatch(const OpPass& p) {
  const lowering::RankShapes& s = stage_.shapes;
  const std::int64_t tokens = s.tokens_local, h = s.h, rows = expert_order_rows(p);
  bf16* copies = new_bf16(p, copies_in(), Form::value, rows * h);
  const auto* order = static_cast<const std::int32_t*>(tensor(p, Tensor::expert_order));
  launch_op(p.op, p.binding,
            gpu::MoePermute{false, bf(p, Tensor::mlp_norm_out), order, nullptr, copies, s.top_k, tokens, h, rows},
            p.stream);
}

void MoeBlock::dispatch_exchange(const OpPass& p) {
  // Every EP rank's copies per expert (as Megatron's dispatcher gathers them), to the host: the chunks' sizes, and
  // the grouped GEMMs' rows.
  const lowering::RankShapes& s = stage_.shapes;
  TWIN_NCCL_CHECK(ncclAllGather(tensor(p, Tensor::expert_counts), gathered_counts_, s.experts_total, ncclInt32,
                                stage_.comms.expert(), p.stream));
  const ExpertExchange& x = exchanges_[{p.mb, p.unit}] =
      plan_expert_exchange(counts_on_host(gathered_counts_, s.ep * s.experts_total, p.stream), s.ep,
                           static_cast<int>(s.experts_total), stage_.ep_rank);
  expert_counts_[{p.mb, p.unit}] = x.local_expert_rows;
  exchange_rows(x, true, bf(p, copies_in()), new_bf16(p, Tensor::expert_input, Form::value, x.rows_held * s.h), s.h,
                p.stream);
  done(p, {{copies_in()}});
}

// out_e [count, n] = in_e [count, k] W_e [k, n] (+ b_e: FC2's bias before the combine weighs the row, as Megatron's
// experts add it, p (y + b))
void MoeBlock::experts_forward(const OpPass& p) {
  const ExpertsGemm g = experts_gemm(p);
  bf16* x = bf(p, g.in);
  bf16* y = new_bf16(p, g.out, Form::value, held_rows(p) * g.out_width);
  const Weight w = weight(p);
  const std::int64_t weight_size = g.in_width * g.out_width;
  p.scratch.grouped->run(per_expert(expert_counts_.at({p.mb, p.unit}),
                                    [&](std::int64_t e, std::int64_t first, std::int64_t count) {
                                      return GemmGroup{count, g.out_width, g.in_width, x + first * g.in_width,
                                                       w.params + e * weight_size, y + first * g.out_width,
                                                       w.bias ? w.bias + e * g.out_width : nullptr};
                                    }),
                         false, false, false, p.stream,
                         {w.bias ? MatmulEpilogue::add_bias : MatmulEpilogue::none, nullptr});
}

void MoeBlock::activation_forward(const OpPass& p) {
  const std::int64_t rows = held_rows(p), ffn = stage_.shapes.moe_ffn;
  bf16* act = new_bf16(p, Tensor::expert_activation_out, Form::value, rows * ffn);
  // Under EP a rank's experts may receive no rows at all (uneven routing): nothing to activate.
  if (rows > 0)
    launch_op(p.op, p.binding,
              gpu::ActivationForward{p.op.activation, bf(p, Tensor::expert_fc1_out), act, rows, ffn,
                                     glu_terms(stage_.shapes)},
              p.stream);
}

void MoeBlock::combine_exchange(const OpPass& p) {
  const std::int64_t routed = stage_.shapes.tokens_local * stage_.shapes.top_k, h = stage_.shapes.h;
  exchange_rows(exchanges_.at({p.mb, p.unit}), false, bf(p, Tensor::expert_out),
                new_bf16(p, copies_out(), Form::value, routed * h), h, p.stream);
  done(p, {{Tensor::expert_out}});
}

// With shared experts their FC2 wrote the branch before the router ran (the graph's order, Megatron's): the routed
// rows are added to it in place.
void MoeBlock::combine(const OpPass& p) {
  const std::int64_t tokens = stage_.shapes.tokens_local, h = stage_.shapes.h;
  bf16* branch = new_bf16(p, Tensor::fc2_out, Form::value, tokens * h);
  launch_op(p.op, p.binding,
            gpu::MoeUnpermute{false, bf(p, copies_out()), nullptr, static_cast<const std::int32_t*>(tensor(p, Tensor::routed_row)),
                              static_cast<const float*>(tensor(p, Tensor::combine_weight)), branch, nullptr, nullptr,
                              nullptr, stage_.shapes.top_k, tokens, h, stage_.shapes.shared_ffn > 0 ? branch : nullptr},
            p.stream);
}

// ---- backward ----

void MoeBlock::combine_backward(const OpPass& p) {
  const lowering::RankShapes& s = stage_.shapes;
  const std::int64_t tokens = s.tokens_local, h = s.h, experts = s.experts_total, routed = tokens * s.top_k;
  const auto* routed_row = static_cast<const std::int32_t*>(tensor(p, Tensor::routed_row));
  const auto* order = static_cast<const std::int32_t*>(tensor(p, Tensor::expert_order));
  const auto* combine = static_cast<const float*>(tensor(p, Tensor::combine_weight));
  // The branch's gradient is the layer output's (the MLP residual adds the branch to the stream).
  const bf16* d_branch = bf(p, Tensor::output, Form::gradient);
  const std::int64_t rows = expert_order_rows(p);
  bf16* d_rows = new_bf16(p, copies_out(), Form::gradient, rows * h);
  auto* d_weight = static_cast<float*>(
      stage_.tensors.make(p.mb, p.unit, {Tensor::combine_weight, Form::gradient}, routed * 4, p.stream));
  if (capacity_)  // a dropped copy's weight took no part in the output: its gradient is zero
    TWIN_CUDA_CHECK(cudaMemsetAsync(d_weight, 0, static_cast<std::size_t>(routed) * 4, p.stream));
  launch_op(p.op, p.binding,
            gpu::MoeUnpermute{true, bf(p, copies_out()), order, routed_row, combine, nullptr, d_branch, d_rows,
                              d_weight, stage_.shapes.top_k, tokens, h, nullptr, rows},
            p.stream);
  bf16* d_logits = new_bf16(p, Tensor::router_logits, Form::gradient, tokens * experts);
  // The load-balancing loss counts the sequence's copies: where the graph summed them over TP (under SP) and CP
  // (routing_counts_reduce), those, over as many shards of the sequence.
  const auto shards = counts_sequence_shards_.find({p.mb, p.unit});
  const int sequence_shards = shards == counts_sequence_shards_.end() ? 1 : shards->second;
  if (shards != counts_sequence_shards_.end()) counts_sequence_shards_.erase(shards);
  const auto* sequence_counts = static_cast<const std::int32_t*>(
      tensor(p, Tensor::expert_counts, sequence_shards > 1 ? Form::reduced : Form::value));
  const float coeff = aux_loss_coeff(sequence_shards);
  const auto* probs = static_cast<const float*>(tensor(p, Tensor::router_probs));
  kernels::moe_aux_loss(probs, sequence_counts, coeff, aux_loss_sum_, tokens, static_cast<int>(experts), s.top_k,
                        scoring_, p.stream);
  kernels::moe_router_backward(probs, static_cast<const std::int32_t*>(tensor(p, Tensor::expert_choice)), combine,
                               d_weight, sequence_counts, coeff, d_logits, tokens, static_cast<int>(experts),
                               stage_.shapes.top_k, scoring_, p.stream);
  if (forced_balance_)  // drawn logits: the router's weights get no gradient through them
    TWIN_CUDA_CHECK(cudaMemsetAsync(d_logits, 0, static_cast<std::size_t>(tokens * experts) * sizeof(bf16), p.stream));
  done(p, {{copies_out()}, {Tensor::router_probs}, {Tensor::combine_weight}, {Tensor::combine_weight, Form::gradient},
           {Tensor::expert_choice}});
}

void MoeBlock::combine_exchange_backward(const OpPass& p) {  // the combine's gradient to the experts' ranks
  const ExpertExchange& x = exchanges_.at({p.mb, p.unit});
  const std::int64_t h = stage_.shapes.h;
  exchange_rows(x, true, bf(p, copies_out(), Form::gradient),
                new_bf16(p, Tensor::expert_out, Form::gradient, x.rows_held * h), h, p.stream);
  done(p, {{copies_out(), Form::gradient}});
}

void MoeBlock::experts_input_grad(const OpPass& p) {  // d in_e [count, k] = d out_e [count, n] W_e^T
  const ExpertsGemm g = experts_gemm(p);
  bf16* dy = bf(p, g.out, Form::gradient);
  bf16* dx = new_bf16(p, g.in, Form::gradient, held_rows(p) * g.in_width);
  bf16* w = weight(p).params;
  const std::int64_t weight_size = g.in_width * g.out_width;
  p.scratch.grouped->run(per_expert(expert_counts_.at({p.mb, p.unit}),
                                    [&](std::int64_t e, std::int64_t first, std::int64_t count) {
                                      return GemmGroup{count, g.in_width, g.out_width, dy + first * g.out_width,
                                                       w + e * weight_size, dx + first * g.in_width};
                                    }),
                         false, true, false, p.stream);
}

// dW_e [k_in, n_out] (+)= in_e^T d out_e, and with biases db_e (+)= the column sums of d out_e
void MoeBlock::experts_weight_grad(const OpPass& p) {
  const ExpertsGemm g = experts_gemm(p);
  bf16* x = bf(p, g.in);
  bf16* dy = bf(p, g.out, Form::gradient);
  const Weight w = weight(p);
  const kernels::GradRef bias_grads = bias_grad_target(p, w);
  const std::int64_t weight_size = g.in_width * g.out_width;
  p.scratch.grouped->run(per_expert(expert_counts_.at({p.mb, p.unit}),
                                    [&](std::int64_t e, std::int64_t first, std::int64_t count) {
                                      return GemmGroup{g.in_width, g.out_width, count, x + first * g.in_width,
                                                       dy + first * g.out_width, w.grads.at(e * weight_size).data,
                                                       bias_grads ? bias_grads.at(e * g.out_width).data : nullptr};
                                    }),
                         true, false, !p.binding.first_gradient, p.stream,
                         {bias_grads ? MatmulEpilogue::bias_grad_of_b : MatmulEpilogue::none, p.scratch.norm_partials},
                         w.grads.type);
  finish_bias_grads(p, w, stage_.shapes.experts_local * g.out_width);
  done(p, {{g.in}, {g.out, Form::gradient}});
}

void MoeBlock::activation_backward(const OpPass& p) {
  const std::int64_t rows = held_rows(p), ffn = stage_.shapes.moe_ffn;
  bf16* d_fc1 = new_bf16(p, Tensor::expert_fc1_out, Form::gradient, rows * stage_.shapes.moe_fc1_width);
  const bf16* d_act = bf(p, Tensor::expert_activation_out, Form::gradient);
  if (rows > 0)
    launch_op(p.op, p.binding,
              gpu::ActivationBackward{p.op.activation, bf(p, Tensor::expert_fc1_out), d_act, d_fc1, rows, ffn,
                                      glu_terms(stage_.shapes)},
              p.stream);
  done(p, {{Tensor::expert_fc1_out}, {Tensor::expert_activation_out, Form::gradient}});
}

void MoeBlock::dispatch_exchange_backward(const OpPass& p) {  // the experts' input gradient back to the tokens' ranks
  const std::int64_t routed = stage_.shapes.tokens_local * stage_.shapes.top_k, h = stage_.shapes.h;
  exchange_rows(exchanges_.at({p.mb, p.unit}), false, bf(p, Tensor::expert_input, Form::gradient),
                new_bf16(p, copies_in(), Form::gradient, routed * h), h, p.stream);
  done(p, {{Tensor::expert_input, Form::gradient}});
  exchanges_.erase({p.mb, p.unit});
}

void MoeBlock::dispatch_backward(const OpPass& p) {  // each token's gradient sums its copies'
  const std::int64_t tokens = stage_.shapes.tokens_local, h = stage_.shapes.h;
  bf16* dx = new_bf16(p, Tensor::mlp_norm_out, Form::gradient, tokens * h);
  launch_op(p.op, p.binding,
            gpu::MoePermute{true, bf(p, copies_in(), Form::gradient), nullptr,
                            static_cast<const std::int32_t*>(tensor(p, Tensor::routed_row)), dx, stage_.shapes.top_k, tokens, h},
            p.stream);
  done(p, {{copies_in(), Form::gradient}, {Tensor::expert_order}, {Tensor::routed_row}});
}

void MoeBlock::router_input_grad(const OpPass& p) {  // the router's part of the norm output's gradient, added
  const lowering::RankShapes& s = stage_.shapes;
  p.scratch.matmul->run({s.tokens_local, s.h, s.experts_total, false, true, true},
                        bf(p, Tensor::router_logits, Form::gradient), weight(p).params,
                        bf(p, Tensor::mlp_norm_out, Form::gradient), p.stream);
}

void MoeBlock::router_weight_grad(const OpPass& p) {  // and its bias's: the column sums of the logits' gradient
  const lowering::RankShapes& s = stage_.shapes;
  const Weight w = weight(p);
  const bf16* d_logits = bf(p, Tensor::router_logits, Form::gradient);
  MatmulProblem problem{s.h, s.experts_total, s.tokens_local, true, false, !p.binding.first_gradient};
  problem.f32_output = w.grads.type == kernels::GradType::f32;
  MatmulProblem fused = problem;
  fused.epilogue = MatmulEpilogue::bias_grad_of_b;
  const kernels::GradRef target = bias_grad_target(p, w);
  if (epilogue_vector_aligned(target.data) && p.scratch.matmul->supports(fused)) {
    p.scratch.matmul->run_into_gradient(fused, bf(p, Tensor::mlp_norm_out), d_logits, w.grads, p.stream, target);
    finish_bias_grads(p, w, s.experts_total);
  } else {
    p.scratch.matmul->run_into_gradient(problem, bf(p, Tensor::mlp_norm_out), d_logits, w.grads, p.stream);
    if (w.bias)
      kernels::bias_grad(d_logits, p.scratch.norm_partials, w.bias_grads, !p.binding.first_gradient, s.tokens_local,
                         s.experts_total, p.stream);
  }
  done(p, {{Tensor::router_logits, Form::gradient}, {Tensor::expert_counts}, {Tensor::expert_counts, Form::reduced}});
  expert_counts_.erase({p.mb, p.unit});
}

}  // namespace twin::exec
