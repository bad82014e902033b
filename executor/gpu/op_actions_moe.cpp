// An MoE layer's experts block, dropless (Megatron-LM's MoE layer with the all-to-all token dispatcher and
// grouped GEMMs): the router's softmax and top-k, the routed copies sorted by expert, under expert parallelism
// sent to the EP ranks that hold their experts (and back), the experts' MLPs as grouped GEMMs over each local
// expert's rows, and the weighted combine; backward the same in reverse, with the Switch load-balancing loss's
// gradient added to the router's. Each expert's row count is known to the host after the router op (one copy
// of `experts` integers), and under EP after the dispatch gathered every EP rank's counts: the grouped GEMMs
// and the all-to-all's chunks need them, as Megatron's do.
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "executor/expert_exchange.hpp"
#include "gpu/checks.hpp"
#include "gpu/grouped_matmul.hpp"
#include "gpu/kernels.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/stage_runtime.hpp"

namespace twin::exec {
namespace {

constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;

}  // namespace

void StageRuntime::exchange_rows(const ExpertExchange& x, bool to_experts, const bf16* from, bf16* to,
                                 std::int64_t width, cudaStream_t stream) {
  // Between one pair, NCCL matches sends and receives in the order issued: both ends list a pair's chunks by
  // local expert.
  const std::vector<ExchangeChunk>& sends = to_experts ? x.from_tokens : x.at_experts;
  const std::vector<ExchangeChunk>& receives = to_experts ? x.at_experts : x.from_tokens;
  TWIN_NCCL_CHECK(ncclGroupStart());
  for (const ExchangeChunk& c : sends)
    TWIN_NCCL_CHECK(ncclSend(from + c.row * width, c.rows * width, ncclBfloat16, c.peer, comms_.expert(), stream));
  for (const ExchangeChunk& c : receives)
    TWIN_NCCL_CHECK(ncclRecv(to + c.row * width, c.rows * width, ncclBfloat16, c.peer, comms_.expert(), stream));
  TWIN_NCCL_CHECK(ncclGroupEnd());
}

std::vector<std::int64_t> StageRuntime::counts_on_host(const std::int32_t* device, std::int64_t count,
                                                       cudaStream_t stream) {
  TWIN_CUDA_CHECK(cudaMemcpyAsync(counts_host_, device, count * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  TWIN_CUDA_CHECK(cudaEventRecord(counts_copied_, stream));
  TWIN_CUDA_CHECK(cudaEventSynchronize(counts_copied_));
  return {counts_host_, counts_host_ + count};
}

void StageRuntime::moe(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const lowering::RankShapes& s = shapes_;
  const std::int64_t tokens = s.tokens_local, h = s.h, experts = s.experts_total;
  const int top_k = scenario_.model.moe.top_k;
  const std::int64_t routed = tokens * top_k;
  const std::int64_t ffn = s.moe_ffn, fc1_width = s.moe_fc1_width;
  // Under EP the copies leave in this rank's expert order (routed_input) and the outputs come back
  // (routed_output); on one EP rank the experts read and write those rows in place.
  const bool exchanged = s.ep > 1;
  const Tensor copies_in = exchanged ? Tensor::routed_input : Tensor::expert_input;
  const Tensor copies_out = exchanged ? Tensor::routed_output : Tensor::expert_out;
  // The router lives in the layer's unit, the experts in their own (executor/parameters.hpp).
  const bool expert_weight = b.subject == OpRole::expert_fc1 || b.subject == OpRole::expert_fc2;
  ParameterUnit& parameters = params_->unit(expert_weight ? expert_unit_of(unit) : unit);
  const auto tensor = [&](Tensor t, Form form = Form::value) { return tensors_.get(mb, unit, {t, form}); };
  const auto bf = [&](Tensor t, Form form = Form::value) { return static_cast<bf16*>(tensor(t, form)); };
  const auto i32 = [&](Tensor t) { return static_cast<std::int32_t*>(tensor(t)); };
  const auto f32 = [&](Tensor t, Form form = Form::value) { return static_cast<float*>(tensor(t, form)); };
  const auto new_bf16 = [&](Tensor t, Form form, std::int64_t elements) {
    return static_cast<bf16*>(tensors_.make(mb, unit, {t, form}, elements * kBf16, stream));
  };
  const auto done = [&](std::initializer_list<Act> names) {
    for (Act name : names) tensors_.release(mb, unit, name, stream);
  };
  // The experts' GEMMs: one group per local expert, over its rows [first, first + count) of the rows it holds.
  const auto held_rows = [&] {
    std::int64_t rows = 0;
    for (std::int64_t count : expert_counts_.at({mb, unit})) rows += count;
    return rows;
  };
  const auto per_expert = [&](auto&& group_of) {
    const std::vector<std::int64_t>& counts = expert_counts_.at({mb, unit});
    std::vector<GemmGroup> groups;
    std::int64_t first = 0;
    for (std::size_t e = 0; e < counts.size(); ++e) {
      groups.push_back(group_of(e, first, counts[e]));
      first += counts[e];
    }
    return groups;
  };
  // The GEMM's weight (the router's, or the experts' stacked [experts * in, out]) and its gradient.
  const bool gemm = b.subject != OpRole::none;
  bf16* weights = gemm ? parameters.params + parameters.tensor(b.subject).offset : nullptr;
  bf16* grads = gemm ? parameters.grads + parameters.tensor(b.subject).offset : nullptr;
  // Expert e's forward product: rows of `in` (in_width) times W_e [in_width, out_width] into rows of `out`.
  const bool fc1 = b.subject == OpRole::expert_fc1;
  const Tensor in = fc1 ? Tensor::expert_input : Tensor::expert_activation_out;
  const Tensor out = fc1 ? Tensor::expert_fc1_out : Tensor::expert_out;
  const std::int64_t in_width = fc1 ? h : ffn, out_width = fc1 ? fc1_width : h, weight_size = in_width * out_width;

  switch (b.action) {
    case Action::router_forward: {
      counts_sequence_shards_[{mb, unit}] = 1;  // this (or a recomputed) pass's counts, summed over nothing yet
      const bf16* x = bf(Tensor::mlp_norm_out);
      bf16* logits = new_bf16(Tensor::router_logits, Form::value, tokens * experts);
      scratch(op).matmul->run({tokens, experts, h, false, false, false}, x, weights, logits, stream);
      auto* probs = static_cast<float*>(tensors_.make(mb, unit, {Tensor::router_probs}, tokens * experts * 4, stream));
      auto* choice = static_cast<std::int32_t*>(tensors_.make(mb, unit, {Tensor::expert_choice}, routed * 4, stream));
      auto* weight = static_cast<float*>(tensors_.make(mb, unit, {Tensor::combine_weight}, routed * 4, stream));
      kernels::moe_router_topk(logits, probs, choice, weight, tokens, static_cast<int>(experts), top_k, stream);
      done({{Tensor::router_logits}});
      auto* order = static_cast<std::int32_t*>(tensors_.make(mb, unit, {Tensor::expert_order}, routed * 4, stream));
      auto* row = static_cast<std::int32_t*>(tensors_.make(mb, unit, {Tensor::routed_row}, routed * 4, stream));
      auto* counts = static_cast<std::int32_t*>(tensors_.make(mb, unit, {Tensor::expert_counts}, experts * 4, stream));
      kernels::moe_sort_by_expert(choice, routed, static_cast<int>(experts), order, row, counts,
                                  scratch(op).moe_sort_workspace,
                                  moe_sort_workspace_bytes_, stream);
      const std::vector<std::int64_t> host = counts_on_host(counts, experts, stream);
      if (!exchanged) expert_counts_[{mb, unit}] = host;  // under EP the dispatch learns the experts' rows
      // A recomputed forward routes the same tokens the same way. The load-balancing loss's value is added with
      // its gradient (the combine's backward), where the sequence's counts are known under SP.
      if (!op.recomputed) expert_loads_.push_back({iteration_, mb, unit, host});
      return;
    }
    case Action::routing_counts_reduce: {
      // Over TP, then over CP: each sum starts from what the one before it in this pass summed.
      int& shards = counts_sequence_shards_.at({mb, unit});
      const Act reduced{Tensor::expert_counts, Form::reduced};
      const auto* counts = static_cast<const std::int32_t*>(
          tensor(Tensor::expert_counts, shards > 1 ? Form::reduced : Form::value));
      auto* sequence_counts = static_cast<std::int32_t*>(tensors_.make(mb, unit, reduced, experts * 4, stream));
      TWIN_NCCL_CHECK(ncclAllReduce(counts, sequence_counts, experts, ncclInt32, ncclSum,
                                    op.group == GroupKind::context ? comms_.context() : comms_.tensor(), stream));
      shards *= op.group_size;
      return;
    }
    case Action::expert_dispatch: {
      bf16* rows = new_bf16(copies_in, Form::value, routed * h);
      launch_op(op, b,
                gpu::MoePermute{false, bf(Tensor::mlp_norm_out), i32(Tensor::expert_order), nullptr, rows, top_k, tokens,
                                h},
                stream);
      return;
    }
    case Action::dispatch_exchange: {
      // Every EP rank's copies per expert (as Megatron's dispatcher gathers them), to the host: the chunks'
      // sizes, and the grouped GEMMs' rows.
      TWIN_NCCL_CHECK(ncclAllGather(i32(Tensor::expert_counts), gathered_counts_, experts, ncclInt32,
                                    comms_.expert(), stream));
      const ExpertExchange& x = exchanges_[{mb, unit}] = plan_expert_exchange(
          counts_on_host(gathered_counts_, s.ep * experts, stream), s.ep, static_cast<int>(experts), me_ep_);
      expert_counts_[{mb, unit}] = x.local_expert_rows;
      exchange_rows(x, true, bf(copies_in), new_bf16(Tensor::expert_input, Form::value, x.rows_held * h), h, stream);
      done({{copies_in}});
      return;
    }
    case Action::combine_exchange: {
      const ExpertExchange& x = exchanges_.at({mb, unit});
      exchange_rows(x, false, bf(Tensor::expert_out), new_bf16(copies_out, Form::value, routed * h), h, stream);
      done({{Tensor::expert_out}});
      return;
    }
    case Action::combine_exchange_backward: {  // the combine's gradient to the experts' ranks
      const ExpertExchange& x = exchanges_.at({mb, unit});
      exchange_rows(x, true, bf(copies_out, Form::gradient),
                    new_bf16(Tensor::expert_out, Form::gradient, x.rows_held * h), h, stream);
      done({{copies_out, Form::gradient}});
      return;
    }
    case Action::dispatch_exchange_backward: {  // the experts' input gradient back to the tokens' ranks
      const ExpertExchange& x = exchanges_.at({mb, unit});
      exchange_rows(x, false, bf(Tensor::expert_input, Form::gradient),
                    new_bf16(copies_in, Form::gradient, routed * h), h, stream);
      done({{Tensor::expert_input, Form::gradient}});
      exchanges_.erase({mb, unit});
      return;
    }
    case Action::expert_forward: {
      bf16* x = bf(in);
      bf16* y = new_bf16(out, Form::value, held_rows() * out_width);
      scratch(op).grouped->run(per_expert([&](std::int64_t e, std::int64_t first, std::int64_t count) {
                      return GemmGroup{count, out_width, in_width, x + first * in_width, weights + e * weight_size,
                                       y + first * out_width};
                    }),
                    false, false, false, stream);
      return;
    }
    case Action::expert_activation_forward: {
      const std::int64_t rows = held_rows();
      bf16* act = new_bf16(Tensor::expert_activation_out, Form::value, rows * ffn);
      // Under EP a rank's experts may receive no rows at all (uneven routing): nothing to activate.
      if (rows > 0)
        launch_op(op, b, gpu::ActivationForward{op.gated_activation, bf(Tensor::expert_fc1_out), act, rows, ffn},
                  stream);
      return;
    }
    case Action::expert_combine: {
      bf16* branch = new_bf16(Tensor::fc2_out, Form::value, tokens * h);
      launch_op(op, b,
                gpu::MoeUnpermute{false, bf(copies_out), nullptr, i32(Tensor::routed_row), f32(Tensor::combine_weight),
                                  branch, nullptr, nullptr, nullptr, top_k, tokens, h},
                stream);
      return;
    }

    // ---- backward, in the graph's order: combine, fc2, activation, fc1, dispatch, router ----
    case Action::expert_combine_backward: {
      // The branch's gradient is the layer output's (the MLP residual adds the branch to the stream).
      const bf16* d_branch = bf(Tensor::output, Form::gradient);
      bf16* d_rows = new_bf16(copies_out, Form::gradient, routed * h);
      auto* d_weight = static_cast<float*>(tensors_.make(mb, unit, {Tensor::combine_weight, Form::gradient}, routed * 4, stream));
      launch_op(op, b,
                gpu::MoeUnpermute{true, bf(copies_out), i32(Tensor::expert_order), i32(Tensor::routed_row),
                                  f32(Tensor::combine_weight), nullptr, d_branch, d_rows, d_weight, top_k, tokens, h},
                stream);
      bf16* d_logits = new_bf16(Tensor::router_logits, Form::gradient, tokens * experts);
      // The load-balancing loss counts the sequence's copies: where the graph summed them over TP (under SP)
      // and CP (routing_counts_reduce), those, over as many shards of the sequence.
      const auto shards = counts_sequence_shards_.find({mb, unit});
      const int sequence_shards = shards == counts_sequence_shards_.end() ? 1 : shards->second;
      if (shards != counts_sequence_shards_.end()) counts_sequence_shards_.erase(shards);
      const auto* sequence_counts = static_cast<const std::int32_t*>(
          tensor(Tensor::expert_counts, sequence_shards > 1 ? Form::reduced : Form::value));
      const float aux_coeff = aux_loss_coeff_per_micro_batch(sequence_shards);
      kernels::moe_aux_loss(f32(Tensor::router_probs), sequence_counts, aux_coeff, aux_loss_sum_, tokens,
                            static_cast<int>(experts), top_k, stream);
      kernels::moe_router_backward(f32(Tensor::router_probs), i32(Tensor::expert_choice), f32(Tensor::combine_weight),
                                   d_weight, sequence_counts, aux_coeff, d_logits, tokens, static_cast<int>(experts),
                                   top_k, stream);
      done({{copies_out}, {Tensor::router_probs}, {Tensor::combine_weight},
            {Tensor::combine_weight, Form::gradient}, {Tensor::expert_choice}});
      return;
    }
    case Action::expert_input_grad: {  // d in_e [count, k] = d out_e [count, n] W_e^T
      bf16* dy = bf(out, Form::gradient);
      bf16* dx = new_bf16(in, Form::gradient, held_rows() * in_width);
      scratch(op).grouped->run(per_expert([&](std::int64_t e, std::int64_t first, std::int64_t count) {
                      return GemmGroup{count, in_width, out_width, dy + first * out_width, weights + e * weight_size,
                                       dx + first * in_width};
                    }),
                    false, true, false, stream);
      return;
    }
    case Action::expert_weight_grad: {  // dW_e [k_in, n_out] (+)= in_e^T [k_in, count] d out_e [count, n_out]
      bf16* x = bf(in);
      bf16* dy = bf(out, Form::gradient);
      scratch(op).grouped->run(per_expert([&](std::int64_t e, std::int64_t first, std::int64_t count) {
                      return GemmGroup{in_width, out_width, count, x + first * in_width, dy + first * out_width,
                                       grads + e * weight_size};
                    }),
                    true, false, !b.first_gradient, stream);
      done({{in}, {out, Form::gradient}});
      return;
    }
    case Action::expert_activation_backward: {
      const std::int64_t rows = held_rows();
      bf16* d_fc1 = new_bf16(Tensor::expert_fc1_out, Form::gradient, rows * fc1_width);
      const bf16* d_act = bf(Tensor::expert_activation_out, Form::gradient);
      if (rows > 0)
        launch_op(op, b, gpu::ActivationBackward{op.gated_activation, bf(Tensor::expert_fc1_out), d_act, d_fc1, rows, ffn},
                  stream);
      done({{Tensor::expert_fc1_out}, {Tensor::expert_activation_out, Form::gradient}});
      return;
    }
    case Action::expert_dispatch_backward: {  // each token's gradient sums its copies'
      bf16* dx = new_bf16(Tensor::mlp_norm_out, Form::gradient, tokens * h);
      launch_op(op, b,
                gpu::MoePermute{true, bf(copies_in, Form::gradient), nullptr, i32(Tensor::routed_row), dx, top_k, tokens,
                                h},
                stream);
      done({{copies_in, Form::gradient}, {Tensor::expert_order}, {Tensor::routed_row}});
      return;
    }
    case Action::router_input_grad:  // the router's part of the norm output's gradient, added to the experts'
      scratch(op).matmul->run({tokens, h, experts, false, true, true},
                                                 bf(Tensor::router_logits, Form::gradient), weights,
                                                 bf(Tensor::mlp_norm_out, Form::gradient), stream);
      return;
    case Action::router_weight_grad:
      scratch(op).matmul->run({h, experts, tokens, true, false, !b.first_gradient},
                                                 bf(Tensor::mlp_norm_out), bf(Tensor::router_logits, Form::gradient),
                                                 grads, stream);
      done({{Tensor::router_logits, Form::gradient}, {Tensor::expert_counts}, {Tensor::expert_counts, Form::reduced}});
      expert_counts_.erase({mb, unit});
      return;
    default: throw std::logic_error("executor: not an experts-block action");
  }
}

float StageRuntime::aux_loss_coeff_per_micro_batch(int sequence_shards) const {
  // The loss is the mean over the global batch; each micro-batch's load-balancing loss counts 1/(M dp) of it.
  // A rank holding 1/shards of the sequence's tokens but the sequence's counts: the kernels normalise by its own
  // tokens squared, so 1/shards^2 more makes the shards' parts add up to the sequence's loss (and the router's
  // gradient, summed over them, to the single GPU's).
  const std::int64_t micro_batches = part_.micro_batches > 0 ? part_.micro_batches : strategy_.num_micro_batches;
  return static_cast<float>(options_.moe_aux_loss_coeff /
                            (static_cast<double>(micro_batches) * strategy_.data_parallel_size * sequence_shards *
                             sequence_shards));
}

}  // namespace twin::exec
