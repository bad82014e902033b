// Each (micro-batch, layer)'s rows per expert are known to the host after the router op (one copy of `experts`
// integers), and under EP after the dispatch gathered every EP rank's counts.
#include "executor/gpu/moe_block.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/moe_routing.hpp"
#include "executor/parameters.hpp"
#include "gpu/bias_epilogue.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "gpu/row_exchange.hpp"

namespace twin::exec {
namespace {

constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;

kernels::RouterScoring router_scoring(const MoeConfig& moe) {
  return {moe.router_score_function == RouterScore::sigmoid, moe.router_pre_softmax,
          static_cast<float>(moe.router_topk_scaling_factor), nullptr, moe.router_num_groups, moe.router_group_topk};
}

}  // namespace

MoeBlock::MoeBlock(const MoeStage& stage)
    : stage_(stage),
      scoring_(router_scoring(stage.moe)),
      forced_balance_(effective_routing(stage.moe).distribution == RoutingDistribution::forced),
      capacity_(expert_capacity(stage.moe, stage.shapes.tokens_local)) {
  const lowering::RankShapes& s = stage_.shapes;
  const std::int64_t routed = s.tokens_local * s.top_k;
  sort_workspace_bytes_ = kernels::moe_sort_workspace_bytes(routed, static_cast<int>(s.experts_total));
  if (capacity_)  // the capacity's sort runs after the router's, in the same scratch
    sort_workspace_bytes_ = std::max(sort_workspace_bytes_, kernels::moe_capacity_workspace_bytes(
                                                                routed, static_cast<int>(s.experts_total)));
  // Under EP the host reads every EP rank's counts.
  TWIN_CUDA_CHECK(cudaMallocHost(&counts_host_, s.ep * s.experts_total * sizeof(std::int32_t)));
  gathered_counts_ =
      static_cast<std::int32_t*>(stage_.tensors.static_buffer(s.ep * s.experts_total * sizeof(std::int32_t)));
  TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&counts_copied_, cudaEventDisableTiming));
  aux_loss_sum_ = static_cast<float*>(stage_.tensors.static_buffer(sizeof(float)));
  if (!stage_.moe.router_expert_bias) return;
  const std::size_t entries = static_cast<std::size_t>(stage_.num_layers) * s.experts_total;
  expert_biases_ = static_cast<float*>(stage_.tensors.static_buffer(entries * sizeof(float)));
  step_counts_ = static_cast<std::int64_t*>(stage_.tensors.static_buffer(entries * sizeof(std::int64_t)));
  TWIN_CUDA_CHECK(cudaMemset(expert_biases_, 0, entries * sizeof(float)));
}

MoeBlock::~MoeBlock() {
  cudaEventDestroy(counts_copied_);
  cudaFreeHost(counts_host_);
}

void MoeBlock::start_iteration(int iteration, cudaStream_t stream) {
  TWIN_CUDA_CHECK(cudaMemsetAsync(aux_loss_sum_, 0, sizeof(float), stream));
  if (stage_.moe.router_expert_bias) update_expert_biases(stream);
  loads_.clear();
  iteration_ = iteration;
}

// Megatron's router counts each layer's routed copies over the step (local_tokens_per_expert), all-reduces them over
// the ranks that share the router and steps the bias (get_updated_expert_bias). Here: over the world, each rank
// adding the layers it routes (TP ranks that route the same tokens add them alike: a factor the sign ignores).
// Every rank calls this once per iteration, with or without loads (the first iteration moves nothing).
void MoeBlock::update_expert_biases(cudaStream_t stream) {
  const std::int64_t experts = stage_.shapes.experts_total;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(stage_.num_layers * experts), 0);
  for (const ExpertLoad& load : loads_)
    for (std::int64_t e = 0; e < experts; ++e) counts.at(load.layer * experts + e) += load.tokens_per_expert.at(e);
  TWIN_CUDA_CHECK(cudaMemcpyAsync(step_counts_, counts.data(), counts.size() * sizeof(std::int64_t),
                                  cudaMemcpyHostToDevice, stream));
  TWIN_NCCL_CHECK(ncclAllReduce(step_counts_, step_counts_, counts.size(), ncclInt64, ncclSum, stage_.comms.world(),
                                stream));
  for (int layer = 0; layer < stage_.num_layers; ++layer)
    kernels::moe_update_expert_bias(step_counts_ + layer * experts, static_cast<float>(stage_.moe.router_bias_update_rate),
                                    expert_biases_ + layer * experts, static_cast<int>(experts), stream);
  TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));  // `counts` is pageable host memory the copy reads
}

kernels::RouterScoring MoeBlock::scoring(int layer) const {
  kernels::RouterScoring scoring = scoring_;
  if (expert_biases_) {
    if (layer < 0 || layer >= stage_.num_layers)
      throw std::logic_error("executor: a router outside the model's layers " + std::to_string(layer));
    scoring.expert_bias = expert_biases_ + layer * stage_.shapes.experts_total;
  }
  return scoring;
}

double MoeBlock::aux_loss() const {
  float aux_loss = 0;
  TWIN_CUDA_CHECK(cudaMemcpy(&aux_loss, aux_loss_sum_, sizeof(float), cudaMemcpyDeviceToHost));
  return aux_loss;
}

// ---- what every op of the block reads ----

MoeBlock::Weight MoeBlock::weight(const OpPass& p) {
  // The router lives in the layer's unit, the experts in their own (executor/parameters.hpp).
  const OpRole subject = p.binding.subject;
  const bool experts = subject == OpRole::expert_fc1 || subject == OpRole::expert_fc2;
  ParameterUnit& unit = stage_.parameters.unit(experts ? expert_unit_of(p.unit) : p.unit);
  const std::int64_t offset = unit.tensor(subject).offset;
  Weight w{unit.params + offset, unit.grads.at(offset)};
  if (const WeightTensor* bias = unit.find(subject, WeightPart::bias)) {
    w.bias = unit.params + bias->offset;
    w.bias_grads = unit.grads.at(bias->offset);
  }
  return w;
}

void MoeBlock::router_logits(const OpPass& p, const Weight& w, const bf16* x, bf16* logits) {
  const lowering::RankShapes& s = stage_.shapes;
  MatmulProblem fused{s.tokens_local, s.experts_total, s.h, false, false, false};
  fused.epilogue = MatmulEpilogue::add_bias;
  product_with_bias(
      w.bias, [&] { return p.scratch.matmul->supports(fused); },
      [&](bf16* bias) {
        MatmulProblem problem = fused;
        if (!bias) problem.epilogue = MatmulEpilogue::none;
        p.scratch.matmul->run(problem, x, w.params, logits, p.stream, nullptr, bias);
      },
      logits, s.tokens_local, s.experts_total, p.stream);
}

kernels::GradRef MoeBlock::bias_grad_target(const OpPass& p, const Weight& w) const {
  if (!w.bias) return {};
  return p.binding.first_gradient ? w.bias_grads : kernels::GradRef(p.scratch.bias_grad, w.grads.type);
}

void MoeBlock::finish_bias_grads(const OpPass& p, const Weight& w, std::int64_t count) const {
  if (!w.bias || p.binding.first_gradient) return;
  kernels::add_bias_grad_sums(p.scratch.bias_grad, p.scratch.norm_partials, w.bias_grads, count, p.stream);
}

void* MoeBlock::tensor(const OpPass& p, Tensor t, Form form) { return stage_.tensors.get(p.mb, p.unit, {t, form}); }

bf16* MoeBlock::bf(const OpPass& p, Tensor t, Form form) { return static_cast<bf16*>(tensor(p, t, form)); }

bf16* MoeBlock::new_bf16(const OpPass& p, Tensor t, Form form, std::int64_t elements) {
  return static_cast<bf16*>(stage_.tensors.make(p.mb, p.unit, {t, form}, elements * kBf16, p.stream));
}

void MoeBlock::done(const OpPass& p, std::initializer_list<Act> names) {
  for (Act name : names) stage_.tensors.release(p.mb, p.unit, name, p.stream);
}

Tensor MoeBlock::copies_in() const { return stage_.shapes.ep > 1 ? Tensor::routed_input : Tensor::expert_input; }
Tensor MoeBlock::copies_out() const { return stage_.shapes.ep > 1 ? Tensor::routed_output : Tensor::expert_out; }

std::int64_t MoeBlock::held_rows(const OpPass& p) const {
  std::int64_t rows = 0;
  for (std::int64_t count : expert_counts_.at({p.mb, p.unit})) rows += count;
  return rows;
}

std::int64_t MoeBlock::expert_order_rows(const OpPass& p) const {
  if (capacity_) return held_rows(p);
  return stage_.shapes.tokens_local * stage_.shapes.top_k;
}

std::vector<std::int64_t> MoeBlock::kept_rows(const std::vector<std::int64_t>& routed_counts) const {
  const std::int64_t capacity = capacity_.value();
  std::vector<std::int64_t> kept(routed_counts.size());
  for (std::size_t e = 0; e < kept.size(); ++e)
    kept[e] = stage_.moe.pad_expert_input_to_capacity ? capacity : std::min(routed_counts[e], capacity);
  return kept;
}

void MoeBlock::drop_beyond_capacity(const OpPass& p) {
  const lowering::RankShapes& s = stage_.shapes;
  const std::int64_t capacity = capacity_.value(), routed = s.tokens_local * s.top_k;
  const bool pad = stage_.moe.pad_expert_input_to_capacity;
  // As many rows as can be kept (the kept ones come first; the rest stay -1 and are never read).
  const std::int64_t rows = pad ? s.experts_total * capacity : routed;
  TensorStore& t = stage_.tensors;
  t.release(p.mb, p.unit, {Tensor::expert_order}, p.stream);  // the router's, of `routed` entries
  auto* order = static_cast<std::int32_t*>(t.make(p.mb, p.unit, {Tensor::expert_order}, rows * 4, p.stream));
  kernels::moe_capacity_layout(static_cast<const std::int32_t*>(tensor(p, Tensor::expert_choice)),
                               static_cast<const float*>(tensor(p, Tensor::combine_weight)), routed,
                               static_cast<int>(s.experts_total), capacity, pad, order, rows,
                               static_cast<std::int32_t*>(tensor(p, Tensor::routed_row)), p.scratch.moe_sort_workspace,
                               sort_workspace_bytes_, p.stream);
}

MoeBlock::ExpertsGemm MoeBlock::experts_gemm(const OpPass& p) const {
  const lowering::RankShapes& s = stage_.shapes;
  if (p.binding.subject == OpRole::expert_fc1) return {Tensor::expert_input, Tensor::expert_fc1_out, s.h, s.moe_fc1_width};
  return {Tensor::expert_activation_out, Tensor::expert_out, s.moe_ffn, s.h};
}

float MoeBlock::aux_loss_coeff(int sequence_shards) const {
  // A rank holding 1/shards of the sequence's tokens but the sequence's counts: the kernels normalise by its own
  // tokens squared, so 1/shards^2 more makes the shards' parts add up to the sequence's loss (and the router's
  // gradient, summed over them, to the single GPU's).
  return static_cast<float>(stage_.moe.aux_loss_coeff / (static_cast<double>(stage_.micro_batches) *
                                                     stage_.data_parallel_size * sequence_shards * sequence_shards));
}

std::uint64_t MoeBlock::forced_logits_seed() const {
  constexpr std::uint64_t kForcedRouting = 0x4d6f45466f726365ull;  // "MoEForce": apart from dropout's seeds
  return kForcedRouting ^ (static_cast<std::uint64_t>(stage_.rank) << 40);
}

std::uint64_t MoeBlock::forced_logits_subsequence(const OpPass& p) const {
  return static_cast<std::uint64_t>(iteration_) << 32 | static_cast<std::uint64_t>(p.unit & 0xffff) << 16 |
         static_cast<std::uint64_t>(p.mb & 0xffff);
}

std::vector<std::int64_t> MoeBlock::counts_on_host(const std::int32_t* device, std::int64_t count,
                                                   cudaStream_t stream) {
  TWIN_CUDA_CHECK(cudaMemcpyAsync(counts_host_, device, count * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  TWIN_CUDA_CHECK(cudaEventRecord(counts_copied_, stream));
  TWIN_CUDA_CHECK(cudaEventSynchronize(counts_copied_));
  return {counts_host_, counts_host_ + count};
}

void MoeBlock::exchange_rows(const ExpertExchange& x, bool to_experts, const bf16* from, bf16* to, std::int64_t width,
                             cudaStream_t stream) {
  // Both ends list a pair's chunks by local expert: the order NCCL matches them in.
  auto blocks = [](const std::vector<ExchangeChunk>& chunks) {
    std::vector<gpu::RowBlock> out;
    out.reserve(chunks.size());
    for (const ExchangeChunk& c : chunks) out.push_back({c.peer, c.row, c.rows});
    return out;
  };
  const std::vector<ExchangeChunk>& sends = to_experts ? x.from_tokens : x.at_experts;
  const std::vector<ExchangeChunk>& receives = to_experts ? x.at_experts : x.from_tokens;
  const auto row_bytes = width * static_cast<std::int64_t>(kBf16);
  gpu::exchange_row_blocks(blocks(sends), blocks(receives), from, to, row_bytes, stage_.comms.expert(), stream);
}

}  // namespace twin::exec
