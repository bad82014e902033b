// The one operator vocabulary. A strategy lowers a model to these ops per rank class; the simulator
// prices and replays them; the executor runs them as real kernels and NCCL calls; traces join back by id.
#pragma once
#include <cstdint>
#include <string>

#include "core/fp8.hpp"    // Fp8Recipe
#include "core/op_kinds.hpp"  // OpKind
#include "core/model.hpp"  // Normalization
#include "core/optimizer_precision.hpp"
#include "core/units.hpp"

namespace twin {


enum class Phase : std::uint8_t { forward, backward, optimizer };

// Streams of a GPU. Ops on one stream run in issue order; ops on different streams overlap.
// Pipeline sends and receives get a stream each so that a posted receive never blocks a send
// (Megatron batches them in one isend/irecv group for the same reason). compute2 is the second compute
// stream of double-strand co-execution (the backward strand); concurrent compute ops share the GPU.
enum class Stream : std::uint8_t { compute, tp_comm, cp_comm, ep_comm, dp_comm, pp_send, pp_recv, compute2, count };

// Which communicator a collective or p2p runs on.
// embedding: the first and the last pipeline stage, which both hold the tied word embedding
// (Megatron's embedding group). expert_tensor: the ranks that split each expert's FC1 columns and FC2 rows
// (Megatron's expert-TP group, expert_tensor_parallel_size ranks). amax: a stage's tensor-, context- and data-parallel
// ranks, over which FP8 delayed scaling reduces its amaxes (Megatron's get_amax_reduction_group(with_context_parallel
// =True): the tensor-and-data-parallel group with CP).
enum class GroupKind : std::uint8_t {
  none, tensor, context, expert, data, pipeline, expert_data, embedding, expert_tensor, amax
};

// What an op is, in the model: names the weight or step so traces and reports read like the model.
enum class OpRole : std::uint8_t {
  none,
  embedding, input_norm, qkv_projection, rope, core_attention, attention_projection, attention_residual,
  mlp_norm, fc1, activation, fc2, mlp_residual,
  router, dispatch, expert_fc1, expert_activation, expert_fc2, combine,
  final_norm, output_projection, loss,
  tp_gather, tp_scatter, tp_reduce,    // TP / SP collectives around attention and MLP
  cp_exchange,                         // ring attention KV exchange
  pipeline_activation, pipeline_gradient,
  grad_reduce, param_gather, embedding_grad_sync, grad_norm, optimizer,
  grad_accumulation,                   // a weight gradient added into the main gradient (no fusion; Op::linear's)
  phase_handoff,                       // hot switching: a zero-byte message ordering a GPU's phase after the one before
  qk_norm,                             // QK-norm (Qwen3): each head's query and key normalised, inside core attention
  shared_expert_fc1, shared_expert_activation, shared_expert_fc2,  // an MoE layer's shared experts (one dense MLP)
  // Multi-latent attention (DeepSeek-V3; core/model.hpp's MlaConfig), in place of qkv_projection: the query's down
  // projection, its latent's norm and up projection (mla_q_up alone: the direct query projection when q_lora_rank is
  // 0), the keys' and values' likewise, and the shared RoPE key's broadcast to every head with the up projection's
  // keys and values (its backward: the gradients' sum over heads). RoPE and attention keep their roles.
  mla_q_down, mla_q_norm, mla_q_up, mla_kv_down, mla_kv_norm, mla_kv_up, mla_kv_expand,
  // Post norms (Gemma-2 and 3, core/model.hpp's post_norms): each branch normalised before the residual adds it.
  post_attention_norm, post_mlp_norm,
  // Multi-token prediction (core/model.hpp's mtp_num_layers), before its transformer layer: the norms of the shifted
  // tokens' embedding (enorm) and of the hidden states (hnorm), their concatenation's projection 2h -> h (eh_proj).
  // Its embedding lookup, final norm, output projection and loss keep the main model's roles.
  mtp_embedding_norm, mtp_hidden_norm, mtp_projection,
  // FP8 delayed scaling's amax all-reduce (max) over GroupKind::amax and the scale update after it, once per
  // forward and once per backward of a micro-batch (Transformer Engine's reduce_and_update_fp8_tensors).
  fp8_amax,
};

// Which product of its linear layer a GEMM computes (the linear is the op's role): the forward output, the
// input gradient (dgrad) or the weight gradient (wgrad). Set where the GEMM is made; the simulator prices all
// three by shape alone, the executor runs each as a different product.
enum class GemmPass : std::uint8_t { none, forward, input_gradient, weight_gradient };

// What a point-to-point op (send, recv) moves, set where the lowering makes it: the executor binds on it and the
// simulator finds ring steps by it, so that nothing reads it from a role, a group or a tag.
enum class Transfer : std::uint8_t {
  none,                        // not a point-to-point op
  activation,                  // a pipeline: a stage's output to the next stage
  gradient,                    // a pipeline: its gradient back to the stage before
  strands,                     // double strand: a pass's forward strand's activation and backward strand's gradient
                               // (Op::strands says which micro-batches and chunks)
  context_ring,                // ring attention: the KV block (backward: and the key-value gradient) to the next CP rank,
                               // a send standing alone (Op::ring_step)
  tensor_ring,                 // Transformer Engine's userbuffers: a step of a TP ring, a send standing alone
  switch_weights,              // hot switching: a unit's bf16 weights to their GPU in the next layout
  switch_gradients,            // hot switching: a unit's accumulated gradients to their reducer in the next layout
  pipelines_reduce,            // an asymmetric plan's gradient ring across pipelines, its reduce-scatter half; and its
  pipelines_gather_gradients,  // all-gather half, of the reduced gradients (ZeRO-0)
  pipelines_gather_weights,    // or of the updated weights (ZeRO-1); Op::ring_segment, Op::ring_step say where
  phase_handoff,               // hot switching: the zero-byte message ordering a GPU's phase after the one before
};

// How an op of context parallelism shares the keys and values over the CP group (Megatron's cp_comm_type): as a
// ring of point-to-point exchanges, the blocks of attention and their merges each a step of it (Op::ring_step), or
// all-gathered before one attention over them. `none` outside context parallelism's attention.
enum class ContextForm : std::uint8_t { none, ring, all_gather };

// The micro-batches and chunks a double-strand transfer (Transfer::strands) carries: its pass's forward strand's
// activation and backward strand's gradient; -1 where the pass has no such strand (warm-up, cool-down).
struct Strands {
  std::int32_t forward_micro_batch = -1, backward_micro_batch = -1;
  std::int16_t forward_chunk = -1, backward_chunk = -1;
};

// Which tensor of a linear layer a tensor-parallel collective moves: the linear's input (gathered before a
// column-parallel GEMM), its output (reduced after a row-parallel GEMM or the embedding), its output
// gradient (gathered before a row-parallel backward) or its input gradient (reduced after a column-parallel
// dgrad). The linear is the op's `linear`. A Ulysses layer's all-to-alls say it too: the QKV linear's output
// and the projection's input gradient go to the heads layout, the projection's input and the QKV linear's
// output gradient back to the sequence layout.
// An fp8_cast says which tensor of its linear it casts: the input, the output gradient or the weight.
enum class LinearTensor : std::uint8_t { none, input, output, output_gradient, input_gradient, weight };

// What a GEMM's operands are: 16-bit (the training precision), or FP8 scaled per tensor (Transformer Engine's
// delayed and current-scaling recipes), per block of 128 (the blockwise recipe: fp8_blockwise, a 1x128 activation
// or gradient by a 128x128 weight, the forward's and the data gradient's; fp8_blockwise_1d, 1x128 by 1x128, the
// weight gradient's, which reads two activations: another cuBLASLt kernel) or per 32 elements (MXFP8). Priced from
// the GPU's FP8 peak (cost/kernel_cost.cpp).
enum class GemmInputs : std::uint8_t { bf16, fp8_per_tensor, fp8_blockwise, mxfp8, fp8_blockwise_1d };

// Where a GEMM's product goes. Every GEMM but a weight gradient's under gradient-accumulation fusion writes a 16-bit
// tensor (`written`). With the fusion and a gradient buffer kept over the step's micro-batches (ZeRO 0 and 1; the
// buffer's dtype framework.reduce_dtype's, as Megatron-Core's DDP allocates main_grad), the step's first micro-batch
// writes its weight gradients into the buffer (`written_fp32` into an fp32 one) and every later one adds its product
// to what the buffer holds (`added`, `added_fp32`: cuBLASLt's beta 1, the buffer read as C and written as D). Priced
// as the product plus an fp32 write's 2 more bytes an element (cost/compute_kinds.cpp says why the read of C is
// not priced); the kernel key names it, so that a measured one (a folded trace) prices its own kind.
enum class GemmOutput : std::uint8_t { written, written_fp32, added, added_fp32 };

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::int32_t count = 1;        // grouped GEMM: count independent problems of this shape
  bool transpose_a = false;
  bool transpose_b = false;
  GemmInputs inputs = GemmInputs::bf16;
  bool e5m2 = false;             // FP8: one operand is an E5M2 gradient (the hybrid format's dgrad and wgrad)
  // One of `split` equal row chunks of one GEMM, issued on rotating streams (Transformer Engine's
  // overlapped GEMMs) so one chunk's last wave fills with the next chunk's tiles: m rows here, and
  // it costs 1/split of the whole GEMM, not a GEMM of m rows alone.
  std::int32_t split = 1;
  // A grouped GEMM over routed rows (an MoE layer's experts): the rows of its busiest group, its m (its k in a
  // weight gradient, where the rows are the reduction); the other count - 1 groups share the rest of count
  // times the mean (m, or k) equally. 0: every group at the mean. Priced as those two parts
  // (gemm_group_parts in cost/profile.hpp): a skewed routing runs a few large and many small products.
  std::int32_t busiest = 0;
};

struct AttentionShape {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  bool causal = true;
  bool flash = true;             // false: unfused (the seq_q x seq_kv scores go through memory)
  bool dropout = false;          // unfused only: a dropout kernel over the scores (mask kept for backward)
  bool cudnn = false;            // fused: cuDNN's kernel (Megatron's "fused" backend) rather than FlashAttention
  // Rows are packs of several sequences, each attending only within itself (varlen attention, hot switching's
  // packs): seq_kv is then the packs' causal work expressed as keys per query, not a context-parallel split.
  bool packed = false;
  // The scores soft-capped before the mask, cap x tanh(score / cap) after the 1/sqrt(d) scale (Gemma-2's
  // attn_logit_softcapping; the cap is the model's attention_softcap): a tanh per score in each pass, another kernel.
  bool softcapped = false;
  // Learned sinks (gpt-oss): a logit per head joins each row's softmax as a key without a value; the layer's weights
  // (model.attention_sinks). Fused attention, then a rescale of the output and, backward, the sinks' gradient.
  bool sinks = false;
  // The values' head dim where it differs from the queries' and keys' (MLA: d_qk = nope + rope, d_v = v_head_dim);
  // 0: head_dim. 16 bits: it fits where the flags leave room, and Op keeps its size.
  std::int16_t v_head_dim = 0;
  // Sliding-window attention: each query attends to at most `window` keys, itself and those just before it
  // (0: all keys before it). Packed rows are not windowed (hot switching's packs refuse windows). 32 bits, as
  // v_head_dim: a window is shorter than a sequence (core/model_limits.hpp), and Op keeps its size.
  std::int32_t window = 0;
};

// What moves a communication op's bytes, for how much it slows the GEMMs beside it. NCCL's kernels occupy
// SMs (the profile's overlap.compute_slowdown, measured). Transformer Engine's userbuffers (Megatron's
// tp_comm_overlap) copy either with the copy engines and one SM ("ring_exchange": the GEMM keeps its SMs)
// or with a kernel on a few SMs the GEMM is launched without ("pipeline" and "bulk": num_sm 16 with
// set_sm_margin, initialize_ub's defaults in transformer_engine/pytorch/module/base.py).
enum class CommKernel : std::uint8_t { nccl, userbuffers_copy_engine, userbuffers_sm };
inline constexpr int kUserbuffersSmCount = 16;

// The share of the seq_q x seq_kv scores a kernel computes: a causal mask with the queries the last seq_q
// positions of the keys (bottom-right aligned) keeps 1 - seq_q / (2 seq_kv) of them, half of a square. Packed
// rows are causal squares of their sequences, whose work seq_kv already states: half.
// A window of w keys keeps, of query p's p keys before it, min(p, w): over the queries at positions
// seq_kv - seq_q .. seq_kv, the integral of min(p, w), which is the causal share when w >= seq_kv.
inline double attention_score_fraction(const AttentionShape& a) {
  if (!a.causal || a.seq_kv <= 0) return 1.0;
  if (a.packed) return 0.5;
  const double kv = static_cast<double>(a.seq_kv), q = static_cast<double>(a.seq_q);
  if (a.window <= 0 || a.window >= a.seq_kv) return 1.0 - q / (2.0 * kv);
  const double w = static_cast<double>(a.window);
  const auto keys_before = [w](double x) { return x <= w ? x * x / 2 : w * w / 2 + w * (x - w); };
  return (keys_before(kv) - keys_before(kv - q)) / (q * kv);
}

// The values' head dim: P V's reduction is over keys, its output v wide (value_head_dim), Q K^T's over head_dim.
inline std::int64_t value_head_dim(const AttentionShape& a) { return a.v_head_dim > 0 ? a.v_head_dim : a.head_dim; }

// Whose parameters a grad_reduce, param_gather or embedding_grad_sync op moves: a layer (>= 0), or one of these.
inline constexpr std::int32_t kNoParameterUnit = -1;
inline constexpr std::int32_t kEmbeddingUnit = -2;   // the input embedding
inline constexpr std::int32_t kHeadUnit = -3;        // final norm and output projection
inline constexpr std::int32_t kWholeStage = -4;      // every parameter of the rank (ZeRO-1/2 gather after the step)

struct Op {
  OpKind kind = OpKind::elementwise;
  OpRole role = OpRole::none;
  Phase phase = Phase::forward;
  Stream stream = Stream::compute;
  std::int32_t layer = -1;        // transformer layer (global index), -1 for none
  std::int32_t micro_batch = -1;
  std::int16_t chunk = 0;         // virtual pipeline chunk (model chunk) on this rank
  bool recomputed = false;        // forward work repeated in backward (counts in HFU, not MFU)
  GemmPass gemm_pass = GemmPass::none;  // gemm, moe_router: which product of the linear (the role) it computes

  GemmShape gemm;                 // gemm, moe_router
  AttentionShape attention;       // attention_*
  std::int64_t rows = 0, cols = 0;  // norm, rope, activation, embedding, loss: rows x cols elements
  // activation: which function (the model's); a gated one (SwiGLU, GeGLU) reads two halves of width cols.
  Activation activation = Activation::swiglu;
  Normalization normalization = Normalization::rmsnorm;  // norm_*: which norm (the model's)
  // A residual add done inside this op (framework.residual_fusion): a gemm's epilogue adds the residual stream
  // to its product (one more m x n read); a norm_backward adds the skip path's gradient to its input gradient
  // (one more rows x cols read). Either way the layer has no residual op of its own there.
  bool fuses_residual = false;
  // fp8_cast: also writes the columnwise copy (see OpKind::fp8_cast). Where SP gathers the rowwise copy alone, an
  // fp8_transpose op after the gather writes the gathered rows' columnwise copy.
  bool fp8_columnwise : 1 = false;
  // Sequence parallelism with per-tensor FP8 (Transformer Engine's _Linear): an all_gather of a linear's input or
  // output gradient moves its rowwise FP8 copy, 1 byte an element (else bf16); a tensorwise fp8_cast of such a
  // tensor scales by the amax that the fp8_amax all-reduce before it took over the TP group (that op's rows x cols:
  // the tensor it took it of), so that every rank's shard has the one scale the gathered tensor keeps. The three
  // FP8 flags share a byte.
  bool fp8_payload : 1 = false;
  bool fp8_amax_reduced : 1 = false;
  // Context parallelism's ring (p2p): which step of the ring an attention block or a KV exchange is. Step k's
  // block computes against the keys and values of the CP rank k places before this one; forward, exchange k
  // passes on the KV block of step k; backward, it also carries the key-value gradient accumulated through step
  // k - 1, and exchange cp brings each rank's completed gradient home. An asymmetric plan's gradient ring across
  // pipelines: the step within its half (0 .. P - 2), of gradient segment `ring_segment`. -1: not a ring op.
  std::int16_t ring_step = -1;
  std::int16_t ring_segment = -1;
  ContextForm context_form = ContextForm::none;  // attention and its exchanges under context parallelism
  OptimizerPrecision optimizer_precision;  // optimizer_step: how the master weights and moments are stored
  // optimizer_step: the bytes of one element of the main gradient it reads (framework.main_grad_dtype, core/framework.hpp
  // main_gradient_bytes: 2 for bf16 or fp16, 4 for fp32), in AdamW and in the gradient norm's pass; part of the kernel
  // key, since calibration times the kernel on a gradient of that type.
  std::int8_t main_gradient_bytes = 2;
  // fp8_cast: the recipe whose cast this is (training.fp8.recipe where the lowering emits it), which names the kernel
  // that calibration benches and the executor runs (gpu::Fp8Cast) and is part of the kernel key; other ops: unused.
  Fp8Recipe fp8_recipe = Fp8Recipe::tensorwise;
  std::uint16_t dispatch_top_k = 0;  // all_to_all of the flex token dispatcher: see dispatch_experts
  std::int64_t elements = 0;      // optimizer_step: parameters updated by this rank
  Bytes bytes = 0;                // elementwise/permute: bytes moved; collectives/p2p: message bytes

  GroupKind group = GroupKind::none;
  CommKernel comm_kernel = CommKernel::nccl;       // communication: what moves the bytes
  OpRole linear = OpRole::none;  // TP collectives, FP8 casts, grad_accumulation: the linear (or embedding) served
  LinearTensor linear_tensor = LinearTensor::none; // TP collectives: which of its tensors they move
  std::int32_t group_size = 1;
  std::int32_t parameter_unit = kNoParameterUnit;  // grad_reduce / param_gather: whose parameters
  std::int32_t peer = -1;         // send/recv: the other rank class
  std::int64_t p2p_tag = -1;      // send/recv: equal tags on the two sides are one transfer
  Transfer transfer = Transfer::none;  // send/recv: what it moves
  // loss_*: the logits are soft-capped first, cap x tanh(logits / cap) (Gemma-2's final_logit_softcapping; the
  // model says the cap). Another kernel variant, not more bytes: the backward recomputes the tanh from the logits.
  bool softcapped_logits = false;
  // all_to_all of the flex token dispatcher (DeepEP, HybridEP): `bytes` is the rank's tokens, each sent once to
  // every rank and node that holds one of its experts, and this with dispatch_top_k is the routing that decides
  // how many (top-k of that many experts, spread evenly over the expert group; sim/collectives.hpp). 0: a plain
  // all-to-all of copies. (Both fields sit in padding.)
  std::uint16_t dispatch_experts = 0;
  Strands strands;                // Transfer::strands: the micro-batches and chunks it carries

  double flops = 0;               // floating-point operations of this op on this rank (0 for memory-bound)

  // Host time: how long the rank's host thread, the one that launches its kernels, works for this op after the
  // op's dependencies have finished and before it can start, with the GPU waiting (a framework that synchronises
  // with the device and then loops in Python or C++ before it issues the op: DeepSpeed's stage 3 before each
  // parameter all-gather, strategies/deepspeed_zero3.hpp). The host does one such piece of work at a time, and
  // issues nothing else of the rank meanwhile (sim/engine.hpp). 0 for every other op: their launches are queued
  // ahead of the GPU and hidden.
  TimeNs host_ns = 0;
  // Dispatch time: how long the rank's host thread takes to issue this op while the GPU works on earlier ones (an
  // eager framework's Python, autograd and dispatcher per kernel: pytorch-fsdp2, strategies/pytorch_fsdp2.hpp). The
  // host issues the rank's ops in order, each once the one before it is issued and its own dispatch time has
  // passed, never waiting for the GPU; an op starts no earlier than its issue. 0 for every op of the other
  // frameworks: their launches run ahead of the GPU and are hidden.
  TimeNs dispatch_ns = 0;

  // The dropout probability this op applies, set where the lowering makes it from the model: a residual add's
  // (elementwise, role attention_residual or mlp_residual) and the embedding's (embedding_forward, _backward) hidden
  // dropout, Megatron's bias-dropout-add over the branch and its dropout of the embedding's output, each keeping a
  // 1-byte mask forward that its backward reads; an attention op's attention dropout over the probabilities (the
  // unfused kernel's or the fused one's). 0: none.
  float dropout = 0;
  // all_to_all: each rank's bytes for one peer go as this many blocks, one NCCL send and receive each in one group
  // (the alltoall dispatcher's exchange, one block per local expert: gpu/row_exchange.hpp). A calibrated profile
  // prices it from its tables by blocks per peer (sim/measured_collectives.hpp). Sits in the tail padding: Op
  // keeps its 240 bytes.
  std::uint16_t blocks_per_peer = 1;
  // gemm: where its product goes (a weight gradient's may add to a gradient buffer: GemmOutput). Tail padding too.
  GemmOutput gemm_output = GemmOutput::written;
  // loss_*: Megatron-LM's cross-entropy without fusion, its passes over an fp32 copy of the logits
  // (core/unfused_loss.hpp; framework.cross_entropy_loss_fusion false). Another kernel variant, and its bytes. Tail
  // padding too.
  bool unfused_loss = false;

  bool is_communication() const { return kind >= OpKind::all_reduce; }
};

// A ring step of a group: every rank of the group sends `bytes` to its ring neighbour at once, so the send
// stands alone, with no recv op (ring attention's KV exchange; the TP ring of Transformer Engine's
// overlapped all-gather).
inline bool is_ring_send(const Op& op) {
  return op.transfer == Transfer::context_ring || op.transfer == Transfer::tensor_ring;
}

// A hot-switching switch's transfer between two layouts (strategies/hot_switch/hot_switch_graph.cpp).
inline bool is_switch_transfer(const Op& op) {
  return op.transfer == Transfer::switch_weights || op.transfer == Transfer::switch_gradients;
}

// A short readable name: "L3.fc1.fwd", "L3.tp_scatter.bwd", "pipeline_activation.send".
std::string op_name(const Op& op);
std::string to_string(OpKind kind);
std::string to_string(OpRole role);
std::string to_string(Phase phase);
std::string to_string(Stream stream);
std::string to_string(GroupKind group);
std::string to_string(GemmPass pass);
std::string to_string(LinearTensor tensor);
std::string to_string(GemmInputs inputs);
std::string to_string(GemmOutput output);
inline bool is_fp8(const GemmShape& g) { return g.inputs != GemmInputs::bf16; }
// Stream names as the trace shows them (tid labels): "compute", "tp", ...
inline constexpr int kStreamCount = static_cast<int>(Stream::count);

}  // namespace twin
