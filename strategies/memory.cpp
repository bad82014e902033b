// Memory per GPU of each pipeline stage: model states (ZeRO-sharded), activations in flight under the
// schedule, NCCL buffers and workspace.
//
// Model states per parameter: mixed precision (bf16/fp16) Adam holds 2 (weights) + 2 (gradients) + 12
// (fp32 master weights, m, v) = 16 bytes, the ZeRO paper's count; fp32 training holds 4 + 4 + 8 (m, v)
// = 16 with no master copy. SGD with momentum keeps one optimizer moment (mixed: 4 + 4, fp32: 4).
// training.optimizer_precision stores the master weights and moments narrower (bf16 main parameters:
// no master copy at all).
// ZeRO-1 shards the optimizer states over the data group, ZeRO-2 the gradients too, ZeRO-3 the weights.
// (Megatron keeps fp32 main gradients unless --grad-reduce-in-bf16, which its own recipe and NeMo's performance
// recipes pass; twin execute keeps bf16 ones.)
//
// Activations per layer generalise Korthikanti et al. 2022 (arXiv 2205.05198) tensor by tensor: the sum of
// the tensors the layer description's blocks save (core/layer.hpp), each 2 bytes per element (masks 1),
// sharded by tp inside the TP regions and, with SP, outside them too. Unfused attention keeps softmax output (+ dropout mask and output with attention
// dropout), flash attention only its output and fp32 softmax statistics; CP divides the sequence.
// Double strand walks its units: the forward strand's unit is saved before the backward strand frees
// the unit beside it, so the peak counts one unit of both strands at once. Under full recompute a backward pass
// also holds its layer's forward, run again. docs/SIMULATOR.md compares each term with Megatron-Core's and twin
// execute's allocations.
#include "strategies/memory.hpp"

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "core/layer.hpp"
#include "strategies/deepspeed_zero3.hpp"
#include "strategies/fp8_linears.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/schedule.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace {


// Korthikanti's terms for one micro-batch on one GPU: s local tokens of b sequences, widths over the whole
// model, a factor for the region (1/tp inside TP regions; outside them 1/tp under SP).
struct SavedTerms {
  const ModelConfig& model;
  double s, b;
  double outside, inside;
  double tp;
  bool recompute_none;
  double routed_imbalance;  // the busiest EP rank's routed copies over the mean (core/moe_routing.hpp)
  bool fused_loss = true;   // framework.cross_entropy_loss_fusion: which logits the loss keeps
  bool fp8 = false;         // the layer's linears in FP8: their weight-gradient inputs kept as FP8 copies
  // Expert TP: a rank holds its expert-TP group's routed copies (gathered by the alltoall dispatcher) at 1/etp of
  // the experts' widths, so its hidden-wide routed tensors are etp times the copies it receives.
  double expert_tensor = 1;

  double width(layer::Width width) const {
    const ModelConfig& m = model;
    const double h = static_cast<double>(m.hidden_size), a = m.num_attention_heads;
    const double d = m.kv_channels > 0 ? static_cast<double>(m.kv_channels) : h / a;
    double q = a * d, kv = m.num_query_groups * d, v = kv, o = q;  // query, key, value and attention output widths
    if (m.mla.enabled()) {  // every head's query and (expanded) key nope + rope wide, its value v_head_dim
      q = kv = a * static_cast<double>(m.mla.qk_head_dim + m.mla.qk_pos_emb_head_dim);
      v = o = a * static_cast<double>(m.mla.v_head_dim);
    }
    const double gate = is_gated(m.activation) ? 2 : 1;
    const double shared = static_cast<double>(m.moe.shared_expert_ffn_hidden_size);
    switch (width) {
      case layer::Width::hidden: return h;
      case layer::Width::query_and_key: return q + kv;
      case layer::Width::value: return v;
      case layer::Width::query: return o;
      case layer::Width::qkv: return q + 2 * kv;
      case layer::Width::fc1: return gate * static_cast<double>(m.ffn_hidden_size);
      case layer::Width::ffn: return static_cast<double>(m.ffn_hidden_size);
      case layer::Width::attention_scores: return a * s;
      case layer::Width::heads: return a;
      case layer::Width::experts: return m.moe.num_experts;
      case layer::Width::expert_fc1: return gate * static_cast<double>(m.moe.ffn_hidden_size) / expert_tensor;
      case layer::Width::expert_ffn: return static_cast<double>(m.moe.ffn_hidden_size) / expert_tensor;
      case layer::Width::vocab: return static_cast<double>(padded_vocab_size(m, static_cast<int>(tp)));
      case layer::Width::shared_fc1: return gate * shared;
      case layer::Width::shared_ffn: return shared;
      case layer::Width::q_latent: return static_cast<double>(m.mla.q_lora_rank);
      case layer::Width::kv_latent: return static_cast<double>(m.mla.kv_lora_rank);
      case layer::Width::two_hidden: return 2 * h;
      case layer::Width::hidden_columns: return h;
    }
    return 0;
  }

  bool kept(layer::KeptWhen when) const {
    const bool unfused = model.attention_backend == AttentionBackend::unfused;
    switch (when) {
      case layer::KeptWhen::always: return true;
      case layer::KeptWhen::hidden_dropout: return model.hidden_dropout > 0;
      case layer::KeptWhen::unrecomputed_unfused: return recompute_none && unfused;
      case layer::KeptWhen::unrecomputed_unfused_dropout:
        return recompute_none && unfused && model.attention_dropout > 0;
      case layer::KeptWhen::unrecomputed_fused: return recompute_none && !unfused;
      case layer::KeptWhen::fused_loss: return fused_loss;
      case layer::KeptWhen::unfused_loss: return !fused_loss;
      case layer::KeptWhen::qk_layernorm: return model.qk_layernorm;
    }
    return false;
  }

  double bytes(const layer::SavedTensor& t) const {
    if (!kept(t.kept)) return 0;
    const double w = width(t.width);
    const double element = fp8 && t.fp8_in_fp8_layer ? 1 : t.bytes_per_element;
    switch (t.region) {
      case layer::Region::sequence_sharded: return element * s * b * w * outside;
      case layer::Region::tensor_sharded: return element * s * b * w * inside;
      case layer::Region::routed:  // the rank's token copies, top_k per token, the busiest rank's share
        return element * (s * b * outside * model.moe.top_k * routed_imbalance * expert_tensor) * w;
    }
    return 0;
  }

  double bytes(std::span<const layer::Block> blocks) const {
    double total = 0;
    for (const layer::Block& block : blocks)
      for (const layer::SavedTensor& saved : block.saved) total += bytes(saved);
    return total;
  }
};

SavedTerms saved_terms(const ModelConfig& model, double local_seq, int micro_batch_size, int tensor_parallel,
                       bool sequence_parallel, Recompute recompute, int expert_parallel) {
  const double t = tensor_parallel;
  const double outside = sequence_parallel && tensor_parallel > 1 ? 1.0 / t : 1.0;
  // The busiest EP rank of the most skewed MoE layer: its routed copies are what the rank must hold.
  double routed_imbalance = 1.0;
  if (model.is_moe() && expert_parallel > 1) {  // one rank holding every expert holds every copy: the mean
    const double copies = local_seq * micro_batch_size * outside * model.moe.top_k * expert_parallel;
    for (const ExpertParallelLoad& load : layer_loads(model, expert_parallel, copies))
      routed_imbalance = std::max(routed_imbalance, load.rank_load);
  }
  return {model,  local_seq, static_cast<double>(micro_batch_size),     outside, 1.0 / t, t,
          recompute == Recompute::none, routed_imbalance};
}

}  // namespace

StateBytes state_bytes_per_parameter(const TrainingConfig& training) {
  const OptimizerPrecision& p = training.optimizer_precision;
  const double moments = bytes_of(p.exp_avg) + (training.optimizer == "sgd" ? 0 : bytes_of(p.exp_avg_sq));
  if (training.precision == "fp32") return {4, 4, moments};  // the fp32 weights are the main parameters
  return {2, 2, master_bytes(p) + moments};
}

Bytes activation_bytes_per_layer(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                                 int tensor_parallel, bool sequence_parallel, int context_parallel,
                                 Recompute recompute, bool moe_layer, int expert_parallel, bool fp8_layer,
                                 int expert_tensor_parallel) {
  SavedTerms terms = saved_terms(model, static_cast<double>(seq_length) / context_parallel, micro_batch_size,
                                 tensor_parallel, sequence_parallel, recompute, expert_parallel);
  terms.fp8 = fp8_layer;
  terms.expert_tensor = expert_tensor_parallel;
  if (recompute == Recompute::full) return std::llround(terms.bytes(layer::kFullyRecomputedLayer));
  return std::llround(terms.bytes(layer::layer_blocks(moe_layer, model.mla.enabled(), model.post_norms)));
}

namespace {
// The embedding and the output layer keep what they keep whatever the recompute: `rows` tokens (micro-batch
// times local sequence) of a TP group.
SavedTerms edge_terms(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  SavedTerms terms = saved_terms(scenario.model, rows, 1, tensor_parallel, sequence_parallel, Recompute::none, 1);
  terms.fused_loss = scenario.framework.cross_entropy_loss_fusion;
  return terms;
}

// Per chunk of a stage, the saved bytes of each unit in forward order (embedding, layers, output layer), their sum
// for one pass, and what a backward pass adds on top while it runs.
struct StageUnits {
  std::vector<std::vector<double>> unit_bytes;
  std::vector<double> pass_bytes;
  // Full recompute: the largest of the chunk's recomputed_layer_bytes.
  std::vector<double> recompute_bytes;
  std::int64_t largest_layer_parameters = 0;
};

// ZeRO-3's gathered weights at their peak. Megatron's (and FSDP's): the layer in use and the one prefetched, 2 x 2 B x
// the largest layer. DeepSpeed's: what its hooks hold at once under the live-parameter cap (strategies/
// deepspeed_zero3.hpp), 2 B each, and the whole fp16 gradient of the largest weight, which autograd materialises
// before the hook reduces and partitions it (stage3.py, reduce_ready_partitions_and_remove_grads). Its reduction
// bucket (reduce_bucket_size, 5e8 elements) is not counted.
double zero3_gather_bytes(const Scenario& scenario, const Strategy& st, std::int64_t largest_layer) {
  if (scenario.framework.zero_implementation != ZeroImplementation::deepspeed) return 2.0 * 2 * largest_layer;
  const lowering::RankShapes shapes = lowering::rank_shapes(scenario, st);
  const bool moe = scenario.model.is_moe();
  return 2.0 * static_cast<double>(
                   lowering::deepspeed_peak_gathered_elements(shapes, moe, st.recompute == Recompute::full) +
                   lowering::deepspeed_largest_weight_elements(shapes, moe));
}

StageUnits stage_units(const Scenario& scenario, const Strategy& st, int stage) {
  const ModelConfig& m = scenario.model;
  const int tp = st.tensor_model_parallel_size, pp = st.pipeline_model_parallel_size;
  const int cp = st.context_parallel_size, ep = st.expert_model_parallel_size;
  const int etp = st.expert_tensor_parallel_size;
  const bool sp = st.sequence_parallel && tp > 1;
  const std::int64_t seq = scenario.training.seq_length;
  const double rows = static_cast<double>(st.micro_batch_size) * static_cast<double>(seq / cp);
  const int chunks = chunks_per_stage(st);
  StageUnits out{std::vector<std::vector<double>>(static_cast<std::size_t>(chunks)),
                 std::vector<double>(static_cast<std::size_t>(chunks), 0.0),
                 std::vector<double>(static_cast<std::size_t>(chunks), 0.0), 0};
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int vs = virtual_stage_of(st, stage, chunk);
    std::vector<double>& units = out.unit_bytes[chunk];
    if (vs == 0) units.push_back(static_cast<double>(embedding_activation_bytes(scenario, rows, tp, sp)));
    for (int layer : chunk_layers(m, st, stage, chunk)) {
      // An MTP depth keeps, beside its layer's, what its entry blocks and its own head (output layer) keep.
      if (m.is_mtp_layer(layer))
        units.push_back(static_cast<double>(mtp_edge_activation_bytes(scenario, rows, tp, sp)));
      const bool fp8 = scenario.training.fp8 && layer_runs_fp8(*scenario.training.fp8, layer, m.num_layers);
      units.push_back(static_cast<double>(activation_bytes_per_layer(m, seq, st.micro_batch_size, tp, sp, cp,
                                                                     st.recompute, m.is_moe_layer(layer), ep, fp8,
                                                                     etp)));
      if (st.recompute == Recompute::full)
        out.recompute_bytes[chunk] = std::max(out.recompute_bytes[chunk], static_cast<double>(recomputed_layer_bytes(
            m, seq, st.micro_batch_size, tp, sp, cp, m.is_moe_layer(layer), ep, etp)));
      out.largest_layer_parameters = std::max(out.largest_layer_parameters, layer_parameters_per_rank(m, layer, tp, ep).dense);
    }
    if (vs == pp * chunks - 1) units.push_back(static_cast<double>(output_layer_activation_bytes(scenario, rows, tp, sp)));
    for (double bytes : units) out.pass_bytes[chunk] += bytes;
  }
  return out;
}

// Walks the stage's schedule, adding a pass's saved tensors at its forward and freeing them at its backward; the
// peak is what the stage must hold. Double strand, unit beside unit: the forward strand saves a unit's tensors
// before the backward strand frees the mirror unit's.
double replayed_activation_peak(const StageUnits& units, const Strategy& st, int stage, int micro_batches,
                                const std::vector<std::vector<ScheduleStep>>& orders) {
  double live = 0, peak = 0;
  if (st.schedule == Schedule::double_strand) {
    const auto strand_orders = double_strand_schedule(st.pipeline_model_parallel_size, micro_batches);
    for (const StrandStep& step : strand_orders[stage]) {
      const std::vector<double>& saved = units.unit_bytes[step.forward_chunk()];
      const std::vector<double>& freed = units.unit_bytes[step.backward_chunk()];
      const double recomputed = step.backward_micro_batch >= 0 ? units.recompute_bytes[step.backward_chunk()] : 0;
      for (std::size_t k = 0; k < std::max(saved.size(), freed.size()); ++k) {
        if (step.forward_micro_batch >= 0 && k < saved.size()) live += saved[k];
        peak = std::max(peak, live + recomputed);
        if (step.backward_micro_batch >= 0 && k < freed.size()) live -= freed[freed.size() - 1 - k];
      }
    }
    return peak;
  }
  for (const ScheduleStep& step : orders[stage]) {
    if (step.forward) {
      live += units.pass_bytes[step.chunk];
      peak = std::max(peak, live);
    } else {
      peak = std::max(peak, live + units.recompute_bytes[step.chunk]);
      live -= units.pass_bytes[step.chunk];
    }
  }
  return peak;
}

// Past the fill each further micro-batch repeats the same work (schedule.hpp), so a stage's activation peak is affine
// in the micro-batch count from there on: constant where the schedule bounds the passes in flight (1F1B,
// interleaved, double strand), one micro-batch's passes more per micro-batch under GPipe. A long run is replayed at
// two counts a whole pipeline round apart, well past the fill (interleaving needs multiples of the stages), and
// extrapolated, instead of at millions of micro-batches for each candidate; tests/strategies/memory_test.cpp holds
// the extrapolation to the full replay.
struct ActivationReplay {
  int first_micro_batches = 0, second_micro_batches = 0;
  std::vector<std::vector<ScheduleStep>> first_orders, second_orders;  // empty for the second when not extrapolated
};

// `combined_1f1b`: Megatron's overlapped EP schedule, whose extra warm-up forward holds one more micro-batch.
std::vector<std::vector<ScheduleStep>> schedule_for_memory(const Strategy& st, int micro_batches, bool combined_1f1b) {
  if (st.schedule == Schedule::double_strand)  // replayed from double_strand_schedule instead
    return std::vector<std::vector<ScheduleStep>>(static_cast<std::size_t>(st.pipeline_model_parallel_size));
  return pipeline_schedule(st.schedule, st.pipeline_model_parallel_size, micro_batches,
                           st.virtual_pipeline_model_parallel_size, combined_1f1b);
}

ActivationReplay activation_replay(const Strategy& st, bool combined_1f1b) {
  const int pp = st.pipeline_model_parallel_size;
  const int past_fill = pp * 4 * (st.virtual_pipeline_model_parallel_size + 1);
  ActivationReplay replay;
  if (st.num_micro_batches <= past_fill + pp) {
    replay.first_micro_batches = replay.second_micro_batches = st.num_micro_batches;
    replay.first_orders = schedule_for_memory(st, st.num_micro_batches, combined_1f1b);
    return replay;
  }
  replay.first_micro_batches = past_fill;
  replay.second_micro_batches = past_fill + pp;
  replay.first_orders = schedule_for_memory(st, past_fill, combined_1f1b);
  replay.second_orders = schedule_for_memory(st, past_fill + pp, combined_1f1b);
  return replay;
}

double peak_activation_bytes(const StageUnits& units, const Strategy& st, int stage, const ActivationReplay& replay) {
  const double first = replayed_activation_peak(units, st, stage, replay.first_micro_batches, replay.first_orders);
  if (replay.second_micro_batches == replay.first_micro_batches) return first;
  const double second = replayed_activation_peak(units, st, stage, replay.second_micro_batches, replay.second_orders);
  const double per_micro_batch = (second - first) / (replay.second_micro_batches - replay.first_micro_batches);
  return second + per_micro_batch * (st.num_micro_batches - replay.second_micro_batches);
}

}  // namespace

Bytes embedding_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  return std::llround(edge_terms(scenario, rows, tensor_parallel, sequence_parallel).bytes(layer::embedding_blocks()));
}

Bytes output_layer_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel,
                                    bool sequence_parallel) {
  return std::llround(edge_terms(scenario, rows, tensor_parallel, sequence_parallel).bytes(layer::head_blocks()));
}

Bytes mtp_edge_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  const SavedTerms terms = edge_terms(scenario, rows, tensor_parallel, sequence_parallel);
  return std::llround(terms.bytes(layer::mtp_entry_blocks()) + terms.bytes(layer::head_blocks()));
}

Bytes recomputed_layer_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                             int tensor_parallel, bool sequence_parallel, int context_parallel, bool moe_layer,
                             int expert_parallel, int expert_tensor_parallel) {
  const auto layer_bytes = [&](Recompute recompute) {
    return activation_bytes_per_layer(model, seq_length, micro_batch_size, tensor_parallel, sequence_parallel,
                                      context_parallel, recompute, moe_layer, expert_parallel, false,
                                      expert_tensor_parallel);
  };
  return layer_bytes(Recompute::none) - layer_bytes(Recompute::full);
}

double model_state_bytes_per_parameter(int zero_stage, int data_parallel, const std::string& precision) {
  TrainingConfig adam;
  adam.precision = precision;
  const StateBytes b = state_bytes_per_parameter(adam);
  const double dp = data_parallel;
  return b.weights / (zero_stage >= 3 ? dp : 1) + b.gradients / (zero_stage >= 2 ? dp : 1) +
         b.optimizer / (zero_stage >= 1 ? dp : 1);
}

MemoryEstimate estimate_memory(const Scenario& scenario, const Strategy& st) {
  const ModelConfig& m = scenario.model;
  const int tp = st.tensor_model_parallel_size, pp = st.pipeline_model_parallel_size;
  const int cp = st.context_parallel_size, ep = st.expert_model_parallel_size;
  const bool sp = st.sequence_parallel && tp > 1;
  const int data_group = st.data_parallel_size * cp;
  const int expert_data_group = expert_data_parallel_size(st);
  const std::int64_t seq = scenario.training.seq_length;
  const std::int64_t tokens = static_cast<std::int64_t>(st.micro_batch_size) * (seq / cp);
  const StateBytes per_param = state_bytes_per_parameter(scenario.training);
  const ActivationReplay replay = activation_replay(st, runs_combined_1f1b(scenario.framework, st));
  int communicators = 0;
  for (int size : {tp, cp, data_group, pp, m.is_moe() ? ep : 1, m.is_moe() ? expert_data_group : 1,
                   m.is_moe() ? st.expert_tensor_parallel_size : 1})
    communicators += size > 1 ? 1 : 0;

  MemoryEstimate estimate;
  for (int stage = 0; stage < pp; ++stage) {
    MemoryBreakdown mem;
    const RankParameters p = stage_parameters_per_rank(m, st, stage);
    const auto sharded = [&](double bytes_per_param, bool shard) {
      const double dense = p.dense * bytes_per_param / (shard ? data_group : 1);
      const double expert = p.expert * bytes_per_param / (shard ? expert_data_group : 1);
      return static_cast<Bytes>(std::llround(dense + expert));
    };
    mem.parameters = sharded(per_param.weights, st.zero_stage >= 3) +
                     std::llround(fp8_state_bytes(scenario, st, stage));
    mem.gradients = sharded(per_param.gradients, st.zero_stage >= 2);
    mem.optimizer_states = sharded(per_param.optimizer, st.zero_stage >= 1);

    const StageUnits units = stage_units(scenario, st, stage);
    mem.activations = std::llround(peak_activation_bytes(units, st, stage, replay));
    const std::int64_t largest_unit = units.largest_layer_parameters;

    double buffers = communicators * kNcclBytesPerCommunicator;
    if (st.zero_stage >= 3 && data_group > 1) buffers += zero3_gather_bytes(scenario, st, largest_unit);
    // Transformer Engine's userbuffers: the gathered input of a column-parallel GEMM and the partial sums of a
    // row-parallel one, registered once per TP group (bf16 T x h each), and the ring's receive buffer.
    if (scenario.framework.tp_comm_overlap && sp) buffers += 3.0 * 2 * tokens * m.hidden_size;
    // Context parallelism by all-gather: one layer's gathered keys and values (bf16) and, in backward,
    // their gradients before the reduce-scatter.
    if (cp > 1 && scenario.framework.cp_comm_type == CpCommType::all_gather) {
      const double kv_heads = std::max(1.0, double(m.num_query_groups) / tp);
      buffers += 2.0 * st.micro_batch_size * double(seq) * 2 * kv_heads * m.kv_channels * 2;
    }
    mem.communication_buffers = std::llround(buffers);
    mem.workspace = std::llround(kWorkspaceBytes);
    mem.outside_allocations = std::llround(communicators * kNcclBytesPerCommunicator + kCudaContextBytes);
    estimate.per_stage.push_back(mem);
    if (mem.total() > estimate.per_stage[estimate.worst_stage].total()) estimate.worst_stage = stage;
  }
  return estimate;
}

std::string out_of_memory_reason(const MemoryEstimate& memory, double capacity_GiB) {
  const double peak_GiB = static_cast<double>(memory.peak_bytes()) / kGiB;
  if (peak_GiB <= capacity_GiB) return {};
  return fmt::format("out of memory: {:.1f} GiB > {:.1f} GiB on stage {}", peak_GiB, capacity_GiB, memory.worst_stage);
}

std::string uniform_out_of_memory_reason(const Scenario& scenario, const Strategy& strategy,
                                         const MemoryEstimate& memory) {
  const Cluster& cluster = scenario.cluster;
  if (cluster.is_homogeneous()) return out_of_memory_reason(memory, cluster.node_groups.front().gpu.memory_GiB);
  const int stage_ranks = strategy.tensor_model_parallel_size * strategy.context_parallel_size * strategy.data_parallel_size;
  for (int stage = 0; stage < static_cast<int>(memory.per_stage.size()); ++stage) {
    const double capacity_GiB =
        smallest_memory_GiB_of_ranks(cluster, global_rank(strategy, 0, 0, 0, stage), stage_ranks);
    const double used_GiB = static_cast<double>(memory.per_stage[stage].total()) / kGiB;
    if (used_GiB > capacity_GiB)
      return fmt::format("out of memory: {:.1f} GiB > {:.1f} GiB on stage {}", used_GiB, capacity_GiB, stage);
  }
  return {};
}

}  // namespace twin
