// Memory per GPU of each pipeline stage: model states (ZeRO-sharded), activations in flight under the
// schedule, NCCL buffers and workspace.
//
// Model states per parameter: mixed precision (bf16/fp16) Adam holds 2 (weights) + 2 (gradients) + 12
// (fp32 master weights, m, v) = 16 bytes, the ZeRO paper's count; fp32 training holds 4 + 4 + 8 (m, v)
// = 16 with no master copy. SGD with momentum keeps one optimizer moment (mixed: 4 + 4, fp32: 4).
// training.optimizer_precision stores the master weights and moments narrower (bf16 main parameters:
// no master copy at all).
// ZeRO-1 shards the optimizer states over the data group, ZeRO-2 the gradients too, ZeRO-3 the weights.
// The gradients are the main gradient, in its dtype (framework.main_grad_dtype: Megatron keeps fp32 main gradients
// unless --grad-reduce-in-bf16, which NeMo's performance recipes pass; twin execute keeps what the scenario says).
//
// Activations per layer generalise Korthikanti et al. 2022 (arXiv 2205.05198) tensor by tensor: the sum of
// the tensors the layer description's blocks save (core/layer.hpp), each 2 bytes per element (masks 1),
// sharded by tp inside the TP regions and, with SP, outside them too. Unfused attention keeps softmax output (+ dropout mask and output with attention
// dropout), flash attention only its output and fp32 softmax statistics; CP divides the sequence.
// Double strand walks its units: the forward strand's unit is saved before the backward strand frees
// the unit beside it, so the peak counts one unit of both strands at once. Under full recompute a backward pass
// also holds its layer's forward, run again; under selective recompute the largest block's tensors its modules
// dropped (strategies/memory_activations.cpp holds the per-layer terms). docs/SIMULATOR.md compares each term with Megatron-Core's and twin
// execute's allocations.
#include "strategies/memory.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "core/attention_scratch.hpp"
#include "core/layer.hpp"
#include "strategies/deepspeed_zero3.hpp"
#include "strategies/fp8_linears.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/schedule.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {

StateBytes state_bytes_per_parameter(const TrainingConfig& training, const FrameworkConfig& framework) {
  const OptimizerPrecision& p = training.optimizer_precision;
  const double moments = bytes_of(p.exp_avg) + (training.optimizer == "sgd" ? 0 : bytes_of(p.exp_avg_sq));
  if (training.precision == "fp32") return {4, 4, moments};  // the fp32 weights are the main parameters
  // DeepSpeed's BF16_Optimizer keeps bf16 gradients and, beside them, the fp32 copy estimate_memory counts.
  const double main_gradient = framework.deepspeed_bf16_optimizer ? 2 : main_gradient_bytes(framework);
  return {2, main_gradient, master_bytes(p) + moments};
}

double zero_gradients_in_flight_bytes(int zero_stage, int data_group, const StateBytes& per_param,
                                      double largest_unit_parameters) {
  if (!zero_shards_gradients(zero_stage) || data_group <= 1) return 0;
  return per_param.weights * largest_unit_parameters;  // autograd writes a whole gradient in the weights' dtype
}

namespace {
// Per chunk of a stage, the saved bytes of each unit in forward order (embedding, layers, output layer), their sum
// for one pass, and what each unit's backward holds beside the saved tensors while it runs.
struct StageUnits {
  std::vector<std::vector<double>> unit_bytes;
  std::vector<double> pass_bytes;
  // A layer's layer_backward_held_bytes; the embedding's nothing, the output layer's output_layer_held_bytes (the
  // fused loss writes the logits' gradient over them: nothing).
  std::vector<std::vector<double>> unit_backward_bytes;
  std::vector<double> backward_over_live;  // backward_peak_over_live of the chunk's units
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

// Without gradient accumulation fusion a linear's GEMM writes its weight gradient in bf16 apart from the main gradient
// until an op adds it there (Megatron's param.grad before its main_grad.add_ hook; twin execute's
// Form::weight_gradient_apart): a unit's backward holds its largest dense linear's, 2 B a weight of the rank's shard
// (its bias's few columns not counted; an experts block's grouped GEMM holds every local expert's; MLA's own
// projections, inside its attention block, are not counted).
double weight_gradient_apart_bytes(const std::optional<lowering::RankShapes>& shapes,
                                   std::span<const layer::Block> blocks) {
  if (!shapes) return 0;
  std::int64_t largest = 0;
  const lowering::RankShapes& s = *shapes;
  for (const layer::Block& b : blocks) {
    if (b.kind == layer::BlockKind::column_linear || b.kind == layer::BlockKind::row_linear)
      largest = std::max(largest, lowering::width_per_rank(s, b.out_width) * lowering::width_per_rank(s, b.in_width));
    if (b.kind == layer::BlockKind::experts)  // a grouped GEMM's: every local expert's FC1 or FC2
      largest = std::max({largest, s.experts_local * s.h * s.moe_fc1_width, s.experts_local * s.moe_ffn * s.h});
  }
  return 2.0 * static_cast<double>(largest);
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
  const RecomputeModuleMask modules = recomputed_modules(st);
  std::optional<lowering::RankShapes> apart_shapes;  // set where weight gradients are written apart
  if (!scenario.framework.gradient_accumulation_fusion) apart_shapes = lowering::rank_shapes(scenario, st);
  const auto n = static_cast<std::size_t>(chunks);
  StageUnits out{std::vector<std::vector<double>>(n), std::vector<double>(n, 0.0), std::vector<std::vector<double>>(n),
                 std::vector<double>(n, 0.0), 0};
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int vs = virtual_stage_of(st, stage, chunk);
    std::vector<double>& units = out.unit_bytes[chunk];
    std::vector<double>& backward = out.unit_backward_bytes[chunk];
    const auto add_unit = [&](Bytes saved, double held_in_backward) {
      units.push_back(static_cast<double>(saved));
      backward.push_back(held_in_backward);
    };
    if (vs == 0) add_unit(embedding_activation_bytes(scenario, rows, tp, sp), 0);
    for (int layer : chunk_layers(m, st, stage, chunk)) {
      // An MTP depth keeps, beside its layer's, what its entry blocks and its own head (output layer) keep.
      if (m.is_mtp_layer(layer)) add_unit(mtp_edge_activation_bytes(scenario, rows, tp, sp), 0);
      const bool moe = m.is_moe_layer(layer);
      const bool fp8 = scenario.training.fp8 && layer_runs_fp8(*scenario.training.fp8, layer, m.num_layers);
      // A weight gradient apart lives beside a fully recomputed layer's tensors (made before the layer's first
      // backward block), not beside selective recompute's attention (made after the MLP's and projection's).
      const auto held = static_cast<double>(layer_backward_held_bytes(m, seq, st.micro_batch_size, tp, sp, cp,
                                                                      st.recompute, moe, ep, fp8, modules, etp));
      const double apart =
          weight_gradient_apart_bytes(apart_shapes, layer::layer_blocks(moe, m.mla.enabled(), m.post_norms));
      add_unit(activation_bytes_per_layer(m, seq, st.micro_batch_size, tp, sp, cp, st.recompute, moe, ep, fp8, modules,
                                          etp),
               st.recompute == Recompute::full ? held + apart : std::max(held, apart));
      out.largest_layer_parameters = std::max(out.largest_layer_parameters, layer_parameters_per_rank(m, layer, tp, ep).dense);
    }
    if (vs == pp * chunks - 1)
      add_unit(output_layer_activation_bytes(scenario, rows, tp, sp),
               // The unfused loss's bf16 tensor goes before the output projection's backward writes its gradient apart.
               std::max(static_cast<double>(output_layer_held_bytes(scenario, rows, tp, sp)),
                        weight_gradient_apart_bytes(apart_shapes, layer::head_blocks())));
    for (double bytes : units) out.pass_bytes[chunk] += bytes;
    out.backward_over_live[chunk] = backward_peak_over_live(units, backward);
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
      const std::vector<double>& held = units.unit_backward_bytes[step.backward_chunk()];
      for (std::size_t k = 0; k < std::max(saved.size(), freed.size()); ++k) {
        if (step.forward_micro_batch >= 0 && k < saved.size()) live += saved[k];
        const bool freeing = step.backward_micro_batch >= 0 && k < freed.size();
        peak = std::max(peak, live + (freeing ? held[freed.size() - 1 - k] : 0.0));
        if (freeing) live -= freed[freed.size() - 1 - k];
      }
    }
    return peak;
  }
  for (const ScheduleStep& step : orders[stage]) {
    if (step.forward) {
      live += units.pass_bytes[step.chunk];
      peak = std::max(peak, live);
    } else {
      peak = std::max(peak, live + units.backward_over_live[step.chunk]);
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

// The output layer's weight gradients deferred to the drain (framework.defer_embedding_wgrad_compute): what the last
// stage keeps for them, added to its peak whole, an upper bound (the last is kept once the stage's passes in flight
// are few; with a limit well below the micro-batches, during the steady state, where the bound is met).
double drain_held_bytes(const Scenario& scenario, const Strategy& st, int stage, std::int64_t rows) {
  const int pp = st.pipeline_model_parallel_size, tp = st.tensor_model_parallel_size;
  if (stage != pp - 1) return 0;
  return deferred_output_wgrad_micro_batches(scenario.framework, pp, st.num_micro_batches) *
         static_cast<double>(deferred_output_wgrad_bytes(scenario, static_cast<double>(rows), tp,
                                                         st.sequence_parallel && tp > 1));
}

}  // namespace

double model_state_bytes_per_parameter(int zero_stage, int data_parallel, const std::string& precision) {
  TrainingConfig adam;
  adam.precision = precision;
  const StateBytes b = state_bytes_per_parameter(adam, FrameworkConfig{});
  const double dp = data_parallel;
  return b.weights / (zero_shards_weights(zero_stage) ? dp : 1) + b.gradients / (zero_shards_gradients(zero_stage) ? dp : 1) +
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
  const StateBytes per_param = state_bytes_per_parameter(scenario.training, scenario.framework);
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
    mem.parameters = sharded(per_param.weights, zero_shards_weights(st.zero_stage)) +
                     std::llround(fp8_state_bytes(scenario, st, stage));
    mem.gradients = sharded(per_param.gradients, zero_shards_gradients(st.zero_stage));
    // DeepSpeed's BF16_Optimizer keeps an fp32 copy of every gradient beside the bf16 ones, unsharded ("4 bytes *
    // params of additional memory", bigscience train/tr11-176B-ml/README.md).
    if (scenario.framework.deepspeed_bf16_optimizer && st.zero_stage == 1) mem.gradients += sharded(4, false);
    mem.optimizer_states = sharded(per_param.optimizer, st.zero_stage >= 1);

    const StageUnits units = stage_units(scenario, st, stage);
    mem.activations =
        std::llround(peak_activation_bytes(units, st, stage, replay) + drain_held_bytes(scenario, st, stage, tokens));
    const std::int64_t largest_unit = units.largest_layer_parameters;

    double buffers = communicators * kNcclBytesPerCommunicator;
    if (st.zero_stage >= 3 && data_group > 1) buffers += zero3_gather_bytes(scenario, st, largest_unit);
    // DeepSpeed's stage 3 counts its whole gradient in zero3_gather_bytes.
    if (!(st.zero_stage >= 3 && scenario.framework.zero_implementation == ZeroImplementation::deepspeed))
      buffers += zero_gradients_in_flight_bytes(st.zero_stage, data_group, per_param, static_cast<double>(largest_unit));
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

Bytes attention_scratch_beyond_default(const RankClass& rc, AttentionImplementation implementation) {
  Bytes extra = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind != OpKind::attention_backward || !op.attention.flash) continue;
    extra = std::max(extra, attention_backward_scratch_bytes(implementation, op.attention) -
                                attention_backward_scratch_bytes(kDefaultAttentionImplementation, op.attention));
  }
  return extra;
}

}  // namespace twin
