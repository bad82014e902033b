// The interpreter's handler of MoE layers' experts blocks, dropless or with an expert capacity (Megatron-LM's MoE
// layer with the all-to-all token dispatcher and grouped GEMMs): the router's scores (softmax or sigmoid, with
// aux-loss-free balancing's expert bias where asked) and top-k, the routed copies sorted by expert (each expert's
// copies beyond its capacity dropped, its rows padded to it where asked), under
// expert parallelism sent to the EP ranks that hold their experts (and back), the experts' MLPs as grouped GEMMs
// over each local expert's rows, and the weighted combine; backward the same in reverse, with the Switch
// load-balancing loss's gradient added to the router's. It owns the routing state between a layer's ops: each
// (micro-batch, layer)'s rows per local expert, the shards of the sequence its counts were summed over, its
// exchange plan under EP, and the iteration's loads and load-balancing loss. One public function per action
// (executor/op_binding.hpp): the runtime's dispatch names each.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "core/model.hpp"
#include "core/op_graph.hpp"
#include "executor/expert_exchange.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/gpu/stream_scratch.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "executor/op_binding.hpp"
#include "executor/run_report.hpp"
#include "gpu/kernels.hpp"
#include "strategies/lowering_emitter.hpp"

namespace twin::exec {

// What an experts block reads from the stage that runs it.
struct MoeStage {
  const lowering::RankShapes& shapes;  // the part strategy's (top_k among them)
  // The model's MoE settings, from which the block takes what it runs: the router's scoring (its score function,
  // pre-softmax, top-k scaling and groups), the load-balancing loss's weight (--moe-aux-loss-coeff: the loss is the
  // mean over the global batch, shared by the step's micro-batches on its data-parallel ranks), forced balance
  // (routing "forced", --moe-router-force-load-balancing as NVIDIA's MoE tables are timed: the router's logits
  // replaced by standard normal draws keyed by this rank, the iteration, layer and micro-batch, no gradient back),
  // aux-loss-free balancing (a bias per layer and expert, moved by router_bias_update_rate before each iteration from
  // the last one's routed copies summed over every rank) and the expert capacity (Megatron's token dropping: each
  // expert keeps at most core/moe_routing.hpp's expert_capacity of a micro-batch's copies, those of the largest
  // combine weight, its drop policy "probs"; padded with zero rows to exactly that where asked).
  const MoeConfig& moe;
  int ep_rank = 0;  // this GPU's place in its expert group
  Communicators& comms;
  StageParameters& parameters;
  TensorStore& tensors;
  std::int64_t micro_batches = 1;
  int data_parallel_size = 1;
  int rank = 0;        // this GPU's global rank: each draws its own tokens' forced logits
  int num_layers = 0;  // the router's units are layers 0 .. num_layers - 1
};

class MoeBlock {
 public:
  explicit MoeBlock(const MoeStage& stage);
  ~MoeBlock();
  MoeBlock(const MoeBlock&) = delete;
  MoeBlock& operator=(const MoeBlock&) = delete;

  // The router's sort's scratch, per compute stream (StreamScratch::moe_sort_workspace).
  std::size_t sort_workspace_bytes() const { return sort_workspace_bytes_; }
  // Zeroes the load-balancing loss on `stream`, moves the expert biases by the last iteration's loads (a collective
  // over every rank, outside the timed iteration) and forgets those loads.
  void start_iteration(int iteration, cudaStream_t stream);
  // After the iteration: its loads, and the load-balancing losses summed (waits for the device).
  const std::vector<ExpertLoad>& loads() const { return loads_; }
  double aux_loss() const;

  void router_forward(const OpPass& p);
  void routing_counts_reduce(const OpPass& p);
  void dispatch(const OpPass& p);
  void dispatch_exchange(const OpPass& p);
  void experts_forward(const OpPass& p);
  void activation_forward(const OpPass& p);
  void combine_exchange(const OpPass& p);
  void combine(const OpPass& p);
  void combine_backward(const OpPass& p);  // and the router's logits' gradient with the load-balancing loss's
  void combine_exchange_backward(const OpPass& p);
  void experts_input_grad(const OpPass& p);
  void experts_weight_grad(const OpPass& p);
  void activation_backward(const OpPass& p);
  void dispatch_exchange_backward(const OpPass& p);
  void dispatch_backward(const OpPass& p);
  void router_input_grad(const OpPass& p);
  void router_weight_grad(const OpPass& p);

 private:
  // A GEMM's weight (the router's, or the experts' stacked [experts * in, out]) and its gradient (the main
  // gradient: bf16 or fp32); with add_bias_linear its bias (the router's [experts], the experts' stacked [experts,
  // out]) and the bias's gradient.
  struct Weight {
    __nv_bfloat16* params = nullptr;
    kernels::GradRef grads;
    __nv_bfloat16* bias = nullptr;
    kernels::GradRef bias_grads;
  };
  Weight weight(const OpPass& p);
  // The router's logits [tokens, experts] = x W (+ b): the bias in cuBLASLt's epilogue where it can, else added after.
  void router_logits(const OpPass& p, const Weight& w, const __nv_bfloat16* x, __nv_bfloat16* logits);
  // Where a weight-gradient GEMM's epilogue writes `count` bias-gradient elements: the gradient itself for the
  // step's first micro-batch, else the stream's scratch, which finish_bias_grads then adds (nullptr: no bias).
  kernels::GradRef bias_grad_target(const OpPass& p, const Weight& w) const;
  void finish_bias_grads(const OpPass& p, const Weight& w, std::int64_t count) const;
  void* tensor(const OpPass& p, layer::Tensor t, Form form = Form::value);
  __nv_bfloat16* bf(const OpPass& p, layer::Tensor t, Form form = Form::value);
  __nv_bfloat16* new_bf16(const OpPass& p, layer::Tensor t, Form form, std::int64_t elements);
  void done(const OpPass& p, std::initializer_list<Act> names);
  // Copies routed under EP leave from (and return to) these; on one EP rank the experts read and write in place.
  layer::Tensor copies_in() const;
  layer::Tensor copies_out() const;
  std::int64_t held_rows(const OpPass& p) const;
  // Rows in expert order before any exchange: the copies routed dropless, the kept (and padding) rows under a
  // capacity (on one EP rank: the rows the experts hold).
  std::int64_t expert_order_rows(const OpPass& p) const;
  // Drops the copies beyond each expert's capacity from the sorted layout: the router's order and routed rows
  // rewritten on the device, in the pass's stream (the host need not know the counts yet).
  void drop_beyond_capacity(const OpPass& p);
  // The rows each expert keeps of its routed copies under the capacity (all of it when padded).
  std::vector<std::int64_t> kept_rows(const std::vector<std::int64_t>& routed_counts) const;
  // The load-balancing loss's weight for a micro-batch whose counts were summed over `sequence_shards` shards.
  float aux_loss_coeff(int sequence_shards) const;
  // An experts GEMM's widths: fc1's [h, fc1 width], fc2's [ffn, h].
  struct ExpertsGemm {
    layer::Tensor in, out;
    std::int64_t in_width = 0, out_width = 0;
  };
  ExpertsGemm experts_gemm(const OpPass& p) const;
  // `count` routing counts from the device, once the stream has reached this point (the host waits: the grouped
  // GEMMs' rows and the all-to-all's chunks are sized by them, as Megatron's are).
  std::vector<std::int64_t> counts_on_host(const std::int32_t* device, std::int64_t count, cudaStream_t stream);
  // Forced balance's key of one router pass: the rank's seed, and (iteration, layer unit, micro-batch).
  std::uint64_t forced_logits_seed() const;
  std::uint64_t forced_logits_subsequence(const OpPass& p) const;
  // Rows of `width` from `from` to `to` over the expert group: the dispatch's direction (to the experts' ranks)
  // or the combine's (back), as `x` plans them.
  void exchange_rows(const ExpertExchange& x, bool to_experts, const __nv_bfloat16* from, __nv_bfloat16* to,
                     std::int64_t width, cudaStream_t stream);
  // The router's scoring for `layer`: its expert bias where aux-loss-free balancing is on.
  kernels::RouterScoring scoring(int layer) const;
  // Aux-loss-free balancing's step from loads_ (every rank calls it before each iteration).
  void update_expert_biases(cudaStream_t stream);

  MoeStage stage_;
  kernels::RouterScoring scoring_;            // the model's, without a layer's expert bias
  bool forced_balance_ = false;               // model.moe.routing forced
  std::optional<std::int64_t> capacity_;      // an expert's capacity in copies; none: dropless
  std::size_t sort_workspace_bytes_ = 0;
  std::int32_t* counts_host_ = nullptr;  // pinned: every EP rank's counts of one layer
  cudaEvent_t counts_copied_ = nullptr;
  std::int32_t* gathered_counts_ = nullptr;  // device: every EP rank's copies per expert
  float* aux_loss_sum_ = nullptr;            // device scalar
  float* expert_biases_ = nullptr;           // device [num_layers, experts]: aux-loss-free balancing only
  std::int64_t* step_counts_ = nullptr;      // device [num_layers, experts]: the last iteration's, summed over ranks
  using Key = std::pair<int, int>;           // (micro-batch, unit)
  std::map<Key, std::vector<std::int64_t>> expert_counts_;  // rows per local expert, until the layer's backward
  // How many shards of the sequence (TP ranks under SP, times CP ranks) the routing counts were summed over, from
  // the router's (last) forward until the layer's backward.
  std::map<Key, int> counts_sequence_shards_;
  std::map<Key, ExpertExchange> exchanges_;  // under EP, until the backward
  std::vector<ExpertLoad> loads_;
  int iteration_ = 0;
};

}  // namespace twin::exec
