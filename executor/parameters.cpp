// Shard maps follow Megatron's TP layout: QKV and FC1 are column-parallel (each rank its heads' q, k, v
// columns, its slice of the gate and up halves), the attention projection and FC2 row-parallel, the
// embedding vocab-parallel by rows and the output projection by columns. Norm weights and biases, row-parallel
// linears' biases and learned positions are replicated. Each linear's bias follows its weight in the unit, each
// LayerNorm's bias its weight (Megatron's order); an experts unit's biases follow each weight stack, the router's bias
// its weight.
// The layout only; executor/gpu/stage_parameters.cpp allocates and initialises the buffers, and
// executor/parameter_units.cpp answers the layout's plain queries (a tensor by role, placement, the norm's ranges).
#include "executor/parameters.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "executor/mla_layout.hpp"
#include "executor/model_support.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {
namespace {

// How a linear's weight is split over TP, as the lowering splits its GEMM (strategies/lowering_linears.hpp): by
// output columns, or by input rows.
enum class TensorParallel : std::uint8_t { column, row };

ShardMap columns(std::int64_t rows, std::int64_t local_cols, std::int64_t global_cols,
                 std::vector<std::pair<std::int64_t, std::int64_t>> segments /* (global_begin, width) */) {
  ShardMap map;
  map.local_rows = rows;
  map.local_cols = local_cols;
  map.global_rows = rows;
  map.global_cols = global_cols;
  map.segments = static_cast<int>(segments.size());
  std::int64_t local = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    map.local_begin[s] = local;
    map.global_begin[s] = segments[s].first;
    map.width[s] = segments[s].second;
    local += segments[s].second;
  }
  return map;
}

ShardMap rows_from(std::int64_t local_rows, std::int64_t cols, std::int64_t row_offset) {
  ShardMap map = columns(local_rows, cols, cols, {{0, cols}});
  map.row_offset = row_offset;
  map.global_rows = 0;  // not known here, and not needed: these seed along rows
  return map;
}

void require_supported(const ModelConfig& m) {
  if (const auto unsupported = first_unsupported_feature(m))
    throw std::invalid_argument("twin execute runs Llama- and GPT-style models; this model has " +
                                unsupported->feature);
}

}  // namespace

namespace {

// Lays out the units of one strategy at one placement: the embedding, a layer (with its experts unit), the
// output layer. This rank's widths are the lowering's (the op graph's GEMMs have exactly these shapes); the
// full widths place each shard in the unsharded weight.
class UnitMaker {
 public:
  UnitMaker(const Scenario& scenario, const Strategy& strategy, const RankPlacement& placement, std::uint64_t seed)
      : m_(scenario.model), strategy_(strategy), placement_(placement), seed_(seed),
        shapes_(lowering::rank_shapes(scenario, strategy)), tp_(shapes_.tp), t_(placement.tp_rank),
        output_stddev_(kStddev / std::sqrt(2.0f * static_cast<float>(m_.num_layers))) {
    require_supported(m_);
  }

  // `pad_as`: the elements of a copy of the table whose shards must line up with the table's.
  ParameterUnitLayout embedding(std::int64_t pad_as) const {
    const std::int64_t vocab_l = shapes_.vocab;
    ParameterUnitLayout unit{kEmbeddingUnit};
    unit.tensors.push_back(
        weight("embedding", OpRole::embedding, rows_from(vocab_l, shapes_.h, t_ * vocab_l), kStddev));
    if (!m_.position_embedding_rope) {  // learned positions, whole on every TP rank (Megatron's)
      WeightTensor positions =
          weight("positions", OpRole::embedding, rows_from(m_.max_position_embeddings, shapes_.h, 0), kStddev);
      positions.part = WeightPart::positions;
      positions.tp_replicated = true;
      unit.tensors.push_back(std::move(positions));
    }
    return finish(std::move(unit), embedding_parameters_per_rank(m_, tp_), kEmbeddingUnit, 0, pad_as);
  }

  // Layer `l`'s unit, and after it its experts unit when the layer is an MoE layer.
  std::vector<ParameterUnitLayout> layer(int l) const {
    const std::int64_t h = shapes_.h, d = shapes_.d, heads_l = shapes_.heads, groups_l = shapes_.groups;
    const std::int64_t heads = heads_l * tp_, groups = groups_l * tp_, ffn_l = shapes_.ffn, ffn = ffn_l * tp_;
    const int t = t_;
    std::vector<ParameterUnitLayout> out;
    ParameterUnitLayout unit{l};
    const std::string p = fmt::format("L{}.", l);
    add_norm(unit, p + "input_norm", OpRole::input_norm);
    if (shapes_.mla()) {
      add_mla(unit, p);
    } else {
      std::vector<std::pair<std::int64_t, std::int64_t>> qkv_blocks;
      for (const ColumnBlock& block : qkv_column_blocks(heads_l, groups_l, d, tp_, t))
        qkv_blocks.emplace_back(block.first_column, block.width);
      add_linear(unit, p + "qkv", OpRole::qkv_projection, TensorParallel::column,
                 columns(h, (heads_l + 2 * groups_l) * d, (heads + 2 * groups) * d, qkv_blocks), kStddev);
      if (m_.qk_layernorm) add_qk_norm(unit, p + "qk_norm");
      if (m_.attention_sinks) add_sinks(unit, p + "sinks");
    }
    const std::int64_t o_width = heads_l * (shapes_.mla() ? shapes_.v_d : d);  // attention's output per rank
    add_linear(unit, p + "proj", OpRole::attention_projection, TensorParallel::row, rows_from(o_width, h, t * o_width),
               output_stddev_);
    // Post norms (Gemma-2 and 3) in Hugging Face's order: post_attention_layernorm after o_proj, then the MLP's
    // pre_feedforward_layernorm (mlp_norm), then post_feedforward_layernorm after down_proj.
    if (m_.post_norms) add_norm(unit, p + "post_attention_norm", OpRole::post_attention_norm);
    add_norm(unit, p + "mlp_norm", OpRole::mlp_norm);
    const RankParameters counted = layer_parameters_per_rank(m_, l, tp_, strategy_.expert_model_parallel_size);
    if (m_.is_moe_layer(l)) {
      if (strategy_.expert_tensor_parallel_size != 1)  // plan_check refuses it first, at its key
        throw std::invalid_argument("experts split over expert tensor parallelism: expert_tensor_parallel_size 1");
      // The router, replicated over TP: under SP each TP rank routes its own tokens, so its gradient is
      // summed over TP as a norm weight's is (Megatron marks it sequence-parallel).
      WeightTensor router = weight(p + "router", OpRole::router, rows_from(h, shapes_.experts_total, 0), kStddev);
      router.tp_replicated = true;
      unit.tensors.push_back(std::move(router));
      if (m_.add_bias_linear) add_router_bias(unit, p + "router.bias");
      if (shapes_.shared_ffn > 0) add_shared_experts(unit, p);
      const int layer_tensors = static_cast<int>(unit.tensors.size());
      out.push_back(finish(std::move(unit), counted.dense, l, 0));
      // The rank's experts (EP rank e holds experts [e * local, (e + 1) * local)), fc1 and fc2 each stacked
      // [experts * in, out]: the stack's rows sit at the first local expert's row in the full stack.
      const std::int64_t experts = shapes_.experts_local, ffn_e = shapes_.moe_ffn, fc1_e = shapes_.moe_fc1_width;
      const std::int64_t first_expert = first_expert_of(placement_.ep_rank, static_cast<int>(experts));
      ParameterUnitLayout expert_unit{expert_unit_of(l), GroupKind::expert_data};
      expert_unit.tensors.push_back(weight(p + "experts_fc1", OpRole::expert_fc1,
                                           rows_from(experts * h, fc1_e, first_expert * h), kStddev));
      add_expert_biases(expert_unit, p + "experts_fc1.bias", OpRole::expert_fc1, fc1_e, first_expert);
      expert_unit.tensors.push_back(weight(p + "experts_fc2", OpRole::expert_fc2,
                                           rows_from(experts * ffn_e, h, first_expert * ffn_e), output_stddev_));
      add_expert_biases(expert_unit, p + "experts_fc2.bias", OpRole::expert_fc2, h, first_expert);
      out.push_back(finish(std::move(expert_unit), counted.expert, l, layer_tensors));
      return out;
    }
    add_linear(unit, p + "fc1", OpRole::fc1, TensorParallel::column,
               shapes_.gated() ? columns(h, 2 * ffn_l, 2 * ffn, {{t * ffn_l, ffn_l}, {ffn + t * ffn_l, ffn_l}})
                              : columns(h, ffn_l, ffn, {{t * ffn_l, ffn_l}}),
               kStddev);
    add_linear(unit, p + "fc2", OpRole::fc2, TensorParallel::row, rows_from(ffn_l, h, t * ffn_l), output_stddev_);
    if (m_.post_norms) add_norm(unit, p + "post_mlp_norm", OpRole::post_mlp_norm);
    out.push_back(finish(std::move(unit), counted.dense, l, 0));
    return out;
  }

  // With tied embeddings the output layer holds no weight of its own beside the table (`holds_embedding`) and a
  // copy of the table, first in its unit, elsewhere. `pad_as`: the embedding unit's elements when the copy's shards
  // must line up with the table's (learned positions make the table's unit the larger).
  ParameterUnitLayout head(bool holds_embedding, std::int64_t pad_as = 0) const {
    const std::int64_t h = shapes_.h, vocab_l = shapes_.vocab, vocab = vocab_l * tp_;
    ParameterUnitLayout unit{kHeadUnit};
    if (m_.untie_embeddings_and_output_weights) {
      add_norm(unit, "final_norm", OpRole::final_norm);
      ShardMap output = columns(h, vocab_l, vocab, {{t_ * vocab_l, vocab_l}});
      output.column_major_seed = true;  // its vocabulary columns are padded further under a larger TP
      unit.tensors.push_back(weight("output", OpRole::output_projection, output, kStddev));
    } else if (!holds_embedding) {
      WeightTensor copy = weight("output (the embedding's copy)", OpRole::output_projection,
                                 rows_from(vocab_l, h, t_ * vocab_l), kStddev);
      copy.embedding_copy = true;
      unit.tensors.push_back(std::move(copy));
      add_norm(unit, "final_norm", OpRole::final_norm);
    } else {
      add_norm(unit, "final_norm", OpRole::final_norm);
    }
    return finish(std::move(unit), output_parameters_per_rank(m_, tp_, holds_embedding), kHeadUnit, 0, pad_as);
  }

  // The elements of the output layer's copy of the table and of the table's unit (each padded as the other).
  std::int64_t table_copy_elements() const { return output_parameters_per_rank(m_, tp_, false); }
  std::int64_t table_elements() const { return embedding_parameters_per_rank(m_, tp_); }

 private:
  static constexpr float kStddev = 0.02f;

  std::uint64_t tensor_seed(std::int32_t unit, int index) const {
    return seed_ + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(unit + 16) + 0xD1B54A32D192ED03ull * index;
  }
  // A norm's weight (ones) and, for LayerNorm, its bias (zeros): whole on every TP rank.
  void add_norm(ParameterUnitLayout& unit, const std::string& name, OpRole role) const {
    WeightTensor w{name, role, 1, shapes_.h};
    w.tp_replicated = true;
    w.shard = rows_from(1, shapes_.h, 0);
    unit.tensors.push_back(w);
    if (m_.normalization == Normalization::rmsnorm) return;
    w.name = name + ".bias";
    w.part = WeightPart::bias;
    unit.tensors.push_back(std::move(w));
  }
  // QK-norm's weights (ones), q_norm then k_norm, each a head wide (kv_channels) as Megatron's q_layernorm and
  // k_layernorm (after linear_qkv in its layer), in one tensor of two rows: the op norms every query and key head.
  // Each TP rank's heads add to their gradient, which is summed over TP with or without SP, as Megatron's
  // finalize_model_grads sums q_layernorm's and k_layernorm's.
  void add_qk_norm(ParameterUnitLayout& unit, const std::string& name) const {
    WeightTensor w{name, OpRole::qk_norm, 2, shapes_.d};
    w.tp_replicated = true;
    w.tp_partial_gradient = true;
    w.shard = rows_from(2, shapes_.d, 0);
    unit.tensors.push_back(std::move(w));
  }
  // Attention's sinks (gpt-oss), a logit per query head, sharded over TP as the heads are: a rank's heads' sinks are
  // its own, their gradients whole on it. Zeros at the start (a sink of logit 0 weighs as one more key of score 0).
  void add_sinks(ParameterUnitLayout& unit, const std::string& name) const {
    const std::int64_t heads_l = shapes_.heads;
    WeightTensor w{name, OpRole::core_attention, 1, heads_l};
    w.part = WeightPart::sinks;
    w.shard = columns(1, heads_l, heads_l * tp_, {{t_ * heads_l, heads_l}});
    unit.tensors.push_back(std::move(w));
  }
  // Multi-latent attention's weights in place of QKV (DeepSeek-V3's q_a_proj, q_a_layernorm, q_b_proj,
  // kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj; q_proj alone in q_up's place when q_lora_rank is 0), [in, out]
  // as executor/gpu/mla_attention.hpp reads them, the latents' norms ones; at TP 1 (plan_check refuses more), so
  // every weight is whole. finish() holds their sum to core's count (layer_parameter_groups).
  void add_mla(ParameterUnitLayout& unit, const std::string& p) const {
    if (tp_ > 1)
      throw std::invalid_argument("multi-latent attention under tensor parallelism (its replicated down projections' "
                                  "and latent norms' gradients are not summed over TP): tensor_model_parallel_size 1");
    const MlaShape s = mla_shape(m_, 1, 1);  // the widths MlaAttention runs (the rows are the tokens')
    const auto whole = [](std::int64_t rows, std::int64_t cols) { return rows_from(rows, cols, 0); };
    if (s.q_lora_rank > 0) {
      unit.tensors.push_back(weight(p + "q_down", OpRole::mla_q_down, whole(s.hidden, s.q_lora_rank), kStddev));
      add_latent_norm(unit, p + "q_norm", OpRole::mla_q_norm, s.q_lora_rank);
    }
    unit.tensors.push_back(weight(p + "q_up", OpRole::mla_q_up,
                                  whole(s.q_lora_rank > 0 ? s.q_lora_rank : s.hidden, s.q_width()), kStddev));
    unit.tensors.push_back(weight(p + "kv_down", OpRole::mla_kv_down, whole(s.hidden, s.ckv_width()), kStddev));
    add_latent_norm(unit, p + "kv_norm", OpRole::mla_kv_norm, s.kv_lora_rank);
    unit.tensors.push_back(weight(p + "kv_up", OpRole::mla_kv_up, whole(s.kv_lora_rank, s.kv_width()), kStddev));
  }
  // A latent's RMSNorm weight (ones), whatever the model's norm (DeepSeek-V3's).
  static void add_latent_norm(ParameterUnitLayout& unit, const std::string& name, OpRole role, std::int64_t rank) {
    WeightTensor w{name, role, 1, rank};
    w.tp_replicated = true;
    w.shard = rows_from(1, rank, 0);
    unit.tensors.push_back(std::move(w));
  }
  // The shared experts (Megatron's mlp.shared_experts, after the router and the routed experts there): a dense MLP
  // of shared_expert_ffn_hidden_size in the layer's unit, replicated over the data group as the attention is. Its
  // FC1's input gradient adds to the routed experts' in place, which needs the whole gradient on the rank: TP 1.
  void add_shared_experts(ParameterUnitLayout& unit, const std::string& p) const {
    if (tp_ > 1)
      throw std::invalid_argument("shared experts under tensor parallelism (their gradient is added to the routed "
                                  "experts' before any TP reduction): tensor_model_parallel_size 1");
    const std::int64_t h = shapes_.h, ffn = shapes_.shared_ffn;
    add_linear(unit, p + "shared_fc1", OpRole::shared_expert_fc1, TensorParallel::column,
               columns(h, shapes_.shared_fc1_width, shapes_.shared_fc1_width, {{0, shapes_.shared_fc1_width}}),
               kStddev);
    add_linear(unit, p + "shared_fc2", OpRole::shared_expert_fc2, TensorParallel::row, rows_from(ffn, h, 0),
               output_stddev_);
  }
  // The router's bias (add_bias_linear; gpt-oss's router has one), a logit per expert, replicated over TP as the
  // router's weight and drawn as it is (Megatron's TopKRouter passes both to init_method).
  void add_router_bias(ParameterUnitLayout& unit, const std::string& name) const {
    WeightTensor bias{name, OpRole::router, 1, shapes_.experts_total};
    bias.part = WeightPart::bias;
    bias.tp_replicated = true;
    bias.shard = rows_from(1, shapes_.experts_total, 0);
    bias.init_stddev = kStddev;
    unit.tensors.push_back(std::move(bias));
  }
  // The rank's experts' biases of one experts GEMM (add_bias_linear), stacked [experts, out] after its weights'
  // stack as Megatron's grouped linear keeps bias0..N beside weight0..N; zeros. Whole on the rank (ETP 1).
  void add_expert_biases(ParameterUnitLayout& unit, const std::string& name, OpRole role, std::int64_t out,
                         std::int64_t first_expert) const {
    if (!m_.add_bias_linear) return;
    WeightTensor bias{name, role, shapes_.experts_local, out};
    bias.part = WeightPart::bias;
    bias.shard = rows_from(shapes_.experts_local, out, first_expert);
    unit.tensors.push_back(std::move(bias));
  }
  // A linear's weight [in, out] and, with add_bias_linear, its bias (zeros) over the weight's output columns: a
  // column-parallel linear's sharded as they are, a row-parallel one's (rows split over TP, all columns here)
  // whole on every TP rank, added once and its gradient summed over TP under SP as a norm weight's.
  void add_linear(ParameterUnitLayout& unit, const std::string& name, OpRole role, TensorParallel split,
                  const ShardMap& map, float init) const {
    unit.tensors.push_back(weight(name, role, map, init));
    if (!m_.add_bias_linear) return;
    ShardMap bias_map = map;
    bias_map.local_rows = bias_map.global_rows = 1;
    bias_map.row_offset = 0;
    WeightTensor bias{name + ".bias", role, 1, map.local_cols};
    bias.part = WeightPart::bias;
    bias.shard = bias_map;
    bias.tp_replicated = split == TensorParallel::row;
    unit.tensors.push_back(std::move(bias));
  }
  static WeightTensor weight(std::string name, OpRole role, ShardMap map, float init) {
    WeightTensor w;
    w.name = std::move(name);
    w.role = role;
    w.rows = map.local_rows;
    w.cols = map.local_cols;
    w.shard = map;
    w.init_stddev = init;
    return w;
  }
  // A tensor's seed is its layer's (or unit's) and its place there: an experts unit's tensors follow their
  // layer's (`seed_place`), so the model is the same however the units are cut. `pad_as`: a unit whose shards
  // must line up with another's (the embedding table's with its copy's) is padded as that unit is.
  ParameterUnitLayout finish(ParameterUnitLayout unit, std::int64_t counted_by_memory_model, std::int32_t seed_unit,
                             int seed_place, std::int64_t pad_as = 0) const {
    for (std::size_t i = 0; i < unit.tensors.size(); ++i) {
      unit.tensors[i].offset = unit.elements;
      // A copy of the embedding starts as the table: the table's seed (it is the embedding unit's first tensor).
      unit.tensors[i].seed = unit.tensors[i].embedding_copy ? tensor_seed(kEmbeddingUnit, 0)
                                                            : tensor_seed(seed_unit, seed_place + static_cast<int>(i));
      unit.elements += unit.tensors[i].elements();
    }
    // One model, one count: the weights allocated here are the ones the simulator's memory model counts.
    if (unit.elements != counted_by_memory_model)
      throw std::logic_error(fmt::format("parameter unit {}: the executor holds {} weights, the memory model counts {}",
                                         unit.id, unit.elements, counted_by_memory_model));
    const bool experts = unit.replicas == GroupKind::expert_data;
    const int replicas = experts ? expert_data_parallel_size(strategy_)
                                 : strategy_.data_parallel_size * strategy_.context_parallel_size;
    unit.padded = (std::max(unit.elements, pad_as) + replicas - 1) / replicas * replicas;
    unit.shard_elements = unit.padded / replicas;
    unit.shard_begin = unit.shard_elements * (experts ? placement_.expert_data_rank : placement_.dp_rank);
    unit.sharded_optimizer = strategy_.zero_stage >= 1 && replicas > 1;
    unit.zero_stage = strategy_.zero_stage;
    return unit;
  }

  const ModelConfig& m_;
  const Strategy& strategy_;
  RankPlacement placement_;
  std::uint64_t seed_;
  lowering::RankShapes shapes_;
  int tp_, t_;
  float output_stddev_;
};

void append(std::vector<ParameterUnitLayout>& to, std::vector<ParameterUnitLayout> units) {
  for (ParameterUnitLayout& unit : units) to.push_back(std::move(unit));
}

}  // namespace

std::vector<ParameterUnitLayout> plan_parameter_units(const Scenario& scenario, const Strategy& strategy,
                                                      const RankPlacement& placement, std::uint64_t seed) {
  const ModelConfig& m = scenario.model;
  const UnitMaker make(scenario, strategy, placement, seed);
  const int chunks = chunks_per_stage(strategy);
  const int last_virtual_stage = strategy.pipeline_model_parallel_size * chunks - 1;
  // Tied embeddings over two stages: the output layer's stage holds a copy of the table, first in its unit, and
  // the table's unit is padded as the copy's, so that under ZeRO a data-parallel rank holds the same elements of
  // both and their gradients can be summed shard by shard (executor/gpu/optimizer_run.cpp).
  bool table_copied = false;
  for (int stage = 0; stage < strategy.pipeline_model_parallel_size; ++stage)
    for (int chunk = 0; chunk < chunks; ++chunk)
      if (virtual_stage_of(strategy, stage, chunk) == last_virtual_stage)
        table_copied = !m.untie_embeddings_and_output_weights && !stage_holds_embedding(strategy, stage);
  std::vector<ParameterUnitLayout> units;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int vs = virtual_stage_of(strategy, placement.stage, chunk);
    if (vs == 0) units.push_back(make.embedding(table_copied ? make.table_copy_elements() : 0));
    const int first = first_layer_of(m, strategy, placement.stage, chunk);
    for (int l = first; l < first + layers_in_virtual_stage(m, strategy, vs); ++l) append(units, make.layer(l));
    if (vs == last_virtual_stage)
      units.push_back(make.head(stage_holds_embedding(strategy, placement.stage),
                                table_copied ? make.table_elements() : 0));
  }
  return units;
}

std::vector<ParameterUnitLayout> plan_parameter_units(const PlanPart& part, int global_rank, std::uint64_t seed) {
  const int rank = part.layout_rank(global_rank);
  if (!part.per_layer() && part.stage_layers.empty())
    return plan_parameter_units(part.scenario, part.strategy, placement_of(part.strategy, rank), seed);
  // A per-layer plan's units each in their own layout, or an asymmetric stage's layers as its pipeline splits them.
  const int stage = coordinates_of(part.strategy, rank).pp, stages = part.strategy.pipeline_model_parallel_size;
  const auto maker = [&](std::int32_t unit) {
    const Strategy& s = part.unit_strategy(unit);
    return UnitMaker(part.scenario, s, placement_of(s, rank), seed);
  };
  // Tied embeddings over two stages: the table and its copy must be sharded alike (plan_check refuses a plan
  // whose embedding and output layer differ in layout), so the table is padded as the copy.
  const bool table_copied = stages > 1 && !part.scenario.model.untie_embeddings_and_output_weights;
  std::vector<ParameterUnitLayout> units;
  if (stage == 0)
    units.push_back(maker(kEmbeddingUnit).embedding(table_copied ? maker(kHeadUnit).table_copy_elements() : 0));
  for (int l = part.first_layer(stage); l < part.first_layer(stage + 1); ++l) append(units, maker(l).layer(l));
  if (stage == stages - 1)
    units.push_back(maker(kHeadUnit).head(stage == 0, table_copied ? maker(kEmbeddingUnit).table_elements() : 0));
  return units;
}

}  // namespace twin::exec
