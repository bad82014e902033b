// Internal to the lowering: the shapes one rank sees under a strategy, and an emitter that appends ops
// to a rank class in issue order, wiring each op to the one whose output it consumes (an explicit
// dependency only across streams: stream order covers the rest).
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "core/layer.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"

namespace twin::lowering {

inline constexpr OpIndex kNoOp = std::numeric_limits<OpIndex>::max();

// One MoE layer on the busiest EP rank (every rank waits for it at the combine), from the routing model
// (core/moe_routing.hpp): its copies per local expert, its busiest expert's and its all-to-all buffer.
struct MoeLayerShapes {
  // Rows per local expert: the copies the rank receives spread over its experts, times expert_tensor_parallel_size
  // (the alltoall dispatcher gathers the expert-TP group's copies before the experts' GEMMs).
  std::int64_t expert_tokens = 0;
  // The busiest expert's rows when the rank holds several experts and they differ (GemmShape::busiest); 0 else.
  std::int64_t busiest_expert_tokens = 0;
  std::int64_t dispatch_bytes = 0;         // the rank's all-to-all buffer: the copies it receives, or sends if more
  bool operator==(const MoeLayerShapes&) const = default;
};

struct RankShapes {
  int tp = 1, cp = 1, ep = 1, pp = 1, vpp = 1;
  int etp = 1;                 // expert_tensor_parallel_size
  bool sp = false;
  int data_group = 1;          // dp*cp
  int expert_data_group = 1;   // tp*cp*dp/(ep*etp)
  int zero_stage = 0;
  Recompute recompute = Recompute::none;
  RecomputeModuleMask recompute_modules{};  // what selective recompute repeats (recomputed_modules)
  bool recomputes(RecomputeModule m) const { return twin::recomputes(recompute_modules, m); }
  std::int64_t b = 0, s = 0;   // micro-batch, local sequence (seq / cp)
  std::int64_t tokens = 0;     // T = b*s, rows of the TP-gathered activations
  std::int64_t tokens_local = 0;  // rows this rank holds outside TP regions (T/tp with SP)
  std::int64_t h = 0, d = 0, heads = 0, groups = 0;  // heads and groups per TP rank
  std::int64_t qkv_width = 0, ffn = 0, fc1_width = 0, vocab = 0;  // per TP rank
  bool rope = true, flash = true;
  Activation activation = Activation::swiglu;  // the model's: every activation op says it
  bool gated() const { return is_gated(activation); }
  bool softcapped_logits = false;  // the model's final_logit_softcap: the loss ops say it
  double attention_softcap = 0;    // the model's (0: none): the attention ops say whether, their kernels take it
  bool attention_sinks = false;    // the model's learned sinks: the attention ops say it
  // quick GeGLU's terms, the model's: the activation ops say the function, their kernels take these
  double glu_linear_offset = 0, activation_func_clamp_value = 0;
  Normalization normalization = Normalization::rmsnorm;  // the model's: every norm op says it
  bool attention_dropout = false;  // unfused attention with a dropout kernel over the scores
  // The model's dropout probabilities, which the ops applying them state (Op::dropout): hidden dropout on the
  // residual adds' branches and the embedding's output; attention dropout on the attention ops.
  float hidden_dropout = 0, attention_dropout_probability = 0;
  bool cudnn_attention = false;    // the fused backend: cuDNN's kernel
  // MoE (per rank): experts held, expert widths (each expert's FC1 columns and FC2 rows over expert TP).
  std::int64_t experts_total = 0, experts_local = 0, moe_ffn = 0, moe_fc1_width = 0;
  int top_k = 0;  // experts each token is routed to
  // Per layer (its global index; dense layers zero): what the busiest EP rank routes.
  std::vector<MoeLayerShapes> moe_layers;
  const MoeLayerShapes& moe_layer(int layer) const { return moe_layers.at(static_cast<std::size_t>(layer)); }
  // Shared experts per TP rank (split like a dense MLP): their FFN width and FC1's; 0 without shared experts.
  std::int64_t shared_ffn = 0, shared_fc1_width = 0;
  bool qk_norm = false;  // QK-norm: a norm over each head's query and key before RoPE
  // Multi-latent attention (0 without): the latents' ranks, each head's RoPE part (d is nope + rope) and its value's
  // head dim; groups = heads (every head its own key and value after the up projection).
  std::int64_t q_lora_rank = 0, kv_lora_rank = 0, rope_d = 0, v_d = 0;
  bool mla() const { return kv_lora_rank > 0; }
  std::int64_t permute_bytes = 0;   // read + write of this rank's routed token copies
  MoeTokenDispatcher dispatcher = MoeTokenDispatcher::alltoall;  // framework.moe_token_dispatcher_type
  // The alltoall dispatcher's blocks per peer (Op::blocks_per_peer): the local experts for twin execute's exchange
  // (and a scenario that names no framework), 1 for Megatron-Core's and PyTorch FSDP2's all_to_all_single.
  int exchange_blocks_per_peer = 1;
  // Megatron-Core's experts (framework.name megatron-core; strategies/megatron_expert_passes.hpp): the eager clamp
  // of a clamped GLU (the model's activation_func_clamp_value) and the eager FC2 bias (its add_bias_linear).
  bool megatron_expert_clamp = false, megatron_expert_bias = false;
  int layers_per_chunk = 0;   // the most layers any virtual stage holds (uneven splits differ by one)
  // framework (core/framework.hpp): TE userbuffers overlap (only with SP), and whether the weight-gradient
  // GEMM accumulates into the fp32 main gradient itself.
  bool tp_comm_overlap = false;
  bool cp_all_gather = false;  // framework.cp_comm_type all_gather
  bool gradient_accumulation_fusion = true;
  bool cross_entropy_loss_fusion = true;
  // framework.residual_fusion, off with hidden dropout (the dropout sits between the branch and the add).
  bool residual_fusion = false;
  // ZeRO-3 as DeepSpeed's stage 3 of 2021 drives it (framework.zero_implementation deepspeed; core/framework.hpp).
  bool deepspeed_zero3 = false;
  // ZeRO-2 and 3 keep only their shard of the gradients, so every micro-batch's backward reduce-scatters each unit's
  // gradients into it: Megatron-FSDP's optim_grads and optim_grads_params, which megatron_args.txt launches for them
  // (grad_reduce_every_bprop, megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py at NVIDIA/Megatron-LM
  // d98e8a64dd), DeepSpeed's stages 2 and 3 and PyTorch FSDP alike. ZeRO-0 and 1 keep whole gradients and reduce
  // them once, in the chunk's last micro-batch.
  bool reduces_every_micro_batch = false;
  // framework.scatter_gather_tensors_in_pipeline where it acts (TP > 1, no SP): a pipeline send carries 1/tp of the
  // tensor, and the receiver all-gathers it over TP before using it (Megatron-LM's schedules only).
  bool scatter_gather_p2p = false;
  // framework.deepspeed_bf16_optimizer at ZeRO stage 1 (core/framework.hpp): the stage's fp32 gradient buffer
  // all-reduced in bf16 once after the backward, tied weights' gradients in fp32, the norm read from the whole buffer.
  bool deepspeed_bf16_optimizer = false;
  // PyTorch's FSDP (framework.name pytorch-fsdp2 or pytorch-fsdp; strategies/pytorch_fsdp2.hpp): its copies, the
  // kernels and host time of its norms, RoPE and activations; the weights freed after a block's forward; the gradients'
  // reduction dtype. flat_parameters: FSDP1's, gathered into the flat parameter the module's weights are views of.
  bool pytorch_fsdp = false;
  bool flat_parameters = false;
  PytorchKernels kernels = PytorchKernels::eager;  // core/framework.hpp pytorch_kernels
  bool reshard_after_forward = true;
  // Full recompute runs a layer's forward again only up to the last tensor its backward keeps (PyTorch's
  // non-reentrant checkpoint: core/framework.hpp recompute_stops_early).
  bool checkpoint_early_stop = false;
  int reduce_bytes = 2;  // bytes per gradient element reduced over data parallelism (core/framework.hpp)
  int main_grad_bytes = 2;  // bytes per element of the main gradient weight gradients accumulate into (the same)
  // training.fp8 (core/fp8.hpp): the layers layer_runs_fp8 names (of num_layers) run their linears in FP8.
  std::optional<Fp8Config> fp8;
  int num_layers = 0;
};

RankShapes rank_shapes(const Scenario& scenario, const Strategy& strategy);

// Bytes per element that a framework's eager kernels move beyond the fused kernel twin prices, forward and backward
// (pytorch-fsdp2's norms and activations: strategies/pytorch_fsdp2.hpp; Megatron-Core's experts:
// strategies/megatron_expert_passes.hpp).
struct EagerPassBytes {
  std::int64_t forward = 0, backward = 0;
  std::int64_t of(bool backward_pass) const { return backward_pass ? backward : forward; }
};

// A width of the layer description (core/layer.hpp) on one TP rank: the forward GEMM's n or k of a
// linear, a tensor's columns.
std::int64_t width_per_rank(const RankShapes& shapes, layer::Width width);

class Emitter {
 public:
  Emitter(RankClass& rank_class, const RankShapes& shapes) : rc_(rank_class), sh_(shapes) {}

  const RankShapes& shapes() const { return sh_; }
  RankClass& rank_class() { return rc_; }

  void begin_pass(Phase phase, int micro_batch, int chunk) {
    phase_ = phase;
    micro_batch_ = micro_batch;
    chunk_ = chunk;
    recomputed_ = false;
    layer_ = -1;
  }
  void set_layer(int layer) { layer_ = layer; }
  int layer() const { return layer_; }
  // The keys a query of the current layer attends to at most (ModelConfig::window_size on a windowed layer; 0: all
  // before it): the layer's attention ops carry it, and passes of different windows are different passes.
  void set_attention_window(std::int64_t keys) { attention_window_ = keys; }
  std::int64_t attention_window() const { return attention_window_; }
  void set_recomputed(bool recomputed) { recomputed_ = recomputed; }
  void set_phase(Phase phase) { phase_ = phase; }
  // Inside a backward pass, emits what `emit_forward` emits as a recomputed forward (activation recompute).
  template <class EmitForward>
  void recompute(EmitForward&& emit_forward) {
    set_phase(Phase::forward);
    set_recomputed(true);
    emit_forward();
    set_recomputed(false);
    set_phase(Phase::backward);
  }
  Phase phase() const { return phase_; }
  int micro_batch() const { return micro_batch_; }
  int chunk() const { return chunk_; }
  // Whether the layer being emitted runs its linears in FP8 (never the embedding or the output layer).
  bool fp8_linears() const { return sh_.fp8 && layer_ >= 0 && layer_runs_fp8(*sh_.fp8, layer_, sh_.num_layers); }

  // The op the next op consumes; kNoOp for none.
  OpIndex chain = kNoOp;
  // One more op the next emitted op must wait for (a prefetched weight gather), consumed by it.
  OpIndex pending_wait = kNoOp;
  // Set around the output layer's backward of a micro-batch whose weight gradient the last stage defers
  // (framework.defer_embedding_wgrad_compute): column_parallel_backward leaves the weight-gradient GEMM out.
  bool defers_weight_gradient = false;
  // The micro-batch whose weight-gradient GEMMs of the unit being emitted run first, storing into the main gradient
  // where later ones add (0, but for the output layer when deferral runs a later micro-batch's first).
  int first_weight_gradient_micro_batch = 0;
  // Per micro-batch, the op after which its loss is complete (the TP all-reduce of vocab-parallel
  // cross-entropy): the loss backward must wait for it.
  std::map<int, OpIndex> loss_complete;

  // Appends `op` (context filled in), after `chain` and `pending_wait`; becomes the new chain.
  OpIndex emit(Op op);
  // Appends `op` after `after` only; leaves the chain alone.
  OpIndex emit_after(Op op, OpIndex after);
  void depend(OpIndex first, OpIndex then);

  // One pass of a layer (its forward, or its backward with what recompute repeats), whose ops `emit_ops` emits from
  // the layer's `blocks` (the same span for every layer alike) once set_layer has named the layer. A pass of this
  // emitter's class with the same blocks and direction and the same entry state (phase, chain and pending wait as
  // seen from the pass) was emitted alike but for its context: it is copied (RankClass::repeat) rather than emitted
  // again (strategies/pass_repeats.cpp).
  template <class EmitOps>
  void emit_pass(const void* blocks, bool backward, EmitOps&& emit_ops) {
    PassOriginal* original = begin_pass_copy(blocks, backward);
    if (!original) return;  // copied
    emit_ops();
    record_pass(*original);
  }

  // Builders for the op kinds the lowering uses.
  // A GEMM of the linear `role` (its weight), computing `pass` of it.
  static Op gemm(OpRole role, GemmPass pass, std::int64_t m, std::int64_t n, std::int64_t k, int count = 1);
  static Op rows_cols(OpKind kind, OpRole role, std::int64_t rows, std::int64_t cols);
  static Op moved(OpKind kind, OpRole role, std::int64_t bytes);
  static Op collective(OpKind kind, OpRole role, Stream stream, GroupKind group, int group_size, std::int64_t bytes);
  // Core attention of `s`'s heads: seq_q queries against seq_kv keys, causal or not, over a window of `window` keys
  // (0: every key before a query; a window of at least seq_kv cuts none, so the op is the causal kernel, keyed and
  // priced as it: what gpu::Attention runs); FLOPs as Q K^T over d and P V over the values' head dim.
  static Op attention(const RankShapes& s, std::int64_t window, bool backward, std::int64_t seq_q, std::int64_t seq_kv,
                      bool causal, ContextForm form = ContextForm::none);
  // The optimizer's update of `elements` parameters, its state stored as `precision` says, reading main gradients of
  // `main_gradient_bytes` per element (core/framework.hpp main_gradient_bytes).
  static Op optimizer_step(std::int64_t elements, const OptimizerPrecision& precision, int main_gradient_bytes);
  // `op` (a TP collective) marked as moving `tensor` of the linear `linear`.
  static Op serving(Op op, OpRole linear, LinearTensor tensor);

 private:
  void fill(Op& op) const;
  // Where the current micro-batch's weight-gradient GEMMs put their products (GemmOutput; docs/FRAMEWORK.md's
  // gradient_accumulation_fusion and reduce_dtype).
  GemmOutput weight_gradient_output() const;
  RankClass& rc_;
  const RankShapes& sh_;
  Phase phase_ = Phase::forward;
  int micro_batch_ = -1;
  int chunk_ = 0;
  int layer_ = -1;
  std::int64_t attention_window_ = 0;
  bool recomputed_ = false;
  // Passes emitted op by op, the originals of later copies (strategies/pass_repeats.cpp).
  struct PassEntry {
    const void* blocks = nullptr;
    bool backward = false;
    Phase phase = Phase::forward;
    bool recomputed = false;
    int chain_stream = -1;  // -1: no chain
    bool chain_fuses_residual = false;
    int pending_stream = -1;  // -1: no pending wait
    bool pending_is_chain = false;
    bool fp8 = false;  // the layer's linears in FP8: other ops than a 16-bit layer's
    std::int64_t attention_window = 0;
    GemmOutput weight_gradients = GemmOutput::written;  // the first micro-batch's store, a later one's add
    MoeLayerShapes moe;  // an MoE layer's routed shapes (they differ by layer under a measured routing)
    bool operator==(const PassEntry&) const = default;
  };
  struct PassOriginal {
    PassEntry entry;
    bool repeatable = false;  // its ops and edges depend on nothing but its entry state and context
    int layer = -1;                        // the emitter's on entry
    OpIndex first = 0, count = 0;          // its ops
    std::size_t edges_first = 0, edges_count = 0;  // its edges, in the graph's edge list
    OpIndex chain = kNoOp, pending = kNoOp;            // on entry
    OpIndex exit_chain = kNoOp, exit_pending = kNoOp;  // on exit
    std::size_t loss_completions = 0;                  // loss_complete's size on entry
    bool recording = false;  // to be recorded by record_pass (an original the first time its entry is seen)
  };
  PassOriginal not_recorded_;
  PassEntry pass_entry(const void* blocks, bool backward) const;
  // Copies the pass when an original of its entry is repeatable and returns nullptr; else the pass is to be emitted
  // op by op, and recorded by record_pass in what this returns (a scratch one when repeats are off, or an original
  // not repeatable).
  PassOriginal* begin_pass_copy(const void* blocks, bool backward);
  void record_pass(PassOriginal& original);
  void copy_pass(const PassOriginal& original);
  std::vector<PassOriginal> pass_originals_;
};

// While one lives, this thread's lowering emits every pass op by op (tests compare the two ways).
class PassRepeatsOff {
 public:
  PassRepeatsOff();
  ~PassRepeatsOff();
  PassRepeatsOff(const PassRepeatsOff&) = delete;
  PassRepeatsOff& operator=(const PassRepeatsOff&) = delete;

 private:
  bool was_off_;
};

// The ops of one block of the layer description in `phase` (backward: with what selective recompute repeats).
using BlockOps = void (*)(Emitter& e, const layer::Block& block, Phase phase);
// The blocks every lowering emits alike: a norm over the rows this rank holds outside TP regions, and a
// residual add (read the stream and the branch, write the sum: 3 bf16 tensors of those rows). With residual
// fusion there is no residual op where a kernel that runs anyway does the add: backward, a layer's norm
// backward adds the skip path's gradient; forward, a GEMM that the add directly follows adds the stream in its
// epilogue (the GEMM says so: Op::fuses_residual).
OpIndex emit_norm(Emitter& e, const layer::Block& norm, Phase phase);
void emit_residual(Emitter& e, const layer::Block& residual, Phase phase);

// A unit's blocks (a layer's, the embedding's, the output layer's; `layer` -1 for the edges): forward in order;
// backward in reverse, after the forward again (marked recomputed) when `recompute_forward`: the whole forward, or
// under checkpoint_early_stop the blocks layer::blocks_recomputed_by_early_stop names.
void emit_unit_forward(Emitter& e, std::span<const layer::Block> blocks, int layer, BlockOps ops);
void emit_unit_backward(Emitter& e, std::span<const layer::Block> blocks, int layer, BlockOps ops,
                        bool recompute_forward);

// One transformer layer's forward and backward (the backward includes what recompute repeats); for an MTP depth's
// layer (ModelConfig::is_mtp_layer) also its entry before it and its own output layer and loss after it.
void emit_layer_forward(Emitter& e, const ModelConfig& model, int layer);
void emit_layer_backward(Emitter& e, const ModelConfig& model, int layer);
// Embedding on the first virtual stage; final norm, output projection and loss on the last.
void emit_embedding_forward(Emitter& e);
void emit_embedding_backward(Emitter& e);
void emit_head_forward(Emitter& e);
void emit_head_backward(Emitter& e);
// The output layer's weight gradient its backward left out (Emitter::defers_weight_gradient), for the emitter's
// micro-batch; its input's gather (SP) after `gather_after`.
void emit_head_deferred_weight_gradient(Emitter& e, OpIndex gather_after);

}  // namespace twin::lowering
