// Galvatron-style per-layer hybrid plans: inside each pipeline stage every transformer layer has its own
// layout (Megatron TP with SP, or Ulysses sequence parallel, over `group` GPUs; data parallel over the
// rest of the stage), ZeRO stage and recompute. The plan is lowered to real op graphs and simulated like
// any strategy.
//
// Consecutive layers of different layouts exchange nothing. A micro-batch's rows are sample-major (each
// sample's sequence in order, as twin execute lays them out) and a sequence-parallel or Ulysses group cuts
// its samples' rows into contiguous equal runs; so under every layout GPU g of a stage holds rows
// [g T, (g + 1) T) of the stage's micro-batch (T = B s / G): block b of group t holds samples
// [b B t / G, (b + 1) B t / G), whose rows start at row b t T, and its GPU r the r-th run of T rows after
// that. (Galvatron, on Megatron's [s, b, h] order, shards the sequence inside a block and must re-lay the
// rows out with an all-to-all where the group changes.)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "strategies/flops.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/memory.hpp"
#include "strategies/search.hpp"

namespace twin {

// How one layer's work is split over a stage's G GPUs: groups of `group` consecutive GPUs share each
// sample (Megatron TP+SP, or Ulysses: sequence-sharded, heads split around attention by all-to-all),
// and the G / group groups take different samples (data parallel).
struct LayerLayout {
  int group = 1;
  bool ulysses = false;
  auto operator<=>(const LayerLayout&) const = default;
};

struct LayerStrategy {
  LayerLayout layout;
  int zero_stage = 0;
  Recompute recompute = Recompute::none;
  bool operator==(const LayerStrategy&) const = default;
};
// "tp4.z1.rc-none", "usp4.z3.rc-full" (Ulysses), "tp1.z3.rc-selective" (pure data parallel).
std::string to_string(const LayerStrategy& strategy);

// The plan, as the lowering takes it and as a candidate holds it (family "per-layer").
struct PerLayerPlan final : FamilyPlan {
  int pipeline_stages = 1;
  // Samples of one micro-batch over one stage's G GPUs (Galvatron's micro-batch): a layer of group t
  // gives each of its G / t groups stage_micro_batch * t / G samples. Every layout then holds the same
  // tokens per GPU, stage_micro_batch * seq_length / G.
  int stage_micro_batch = 1;
  int num_micro_batches = 1;
  Schedule schedule = Schedule::one_f_one_b;  // 1f1b or gpipe
  std::vector<int> stage_layers;              // transformer layers per stage, in order
  std::vector<LayerStrategy> layers;          // one per transformer layer

  int first_layer(int stage) const;
  std::string family() const override { return "per-layer"; }
  // Unique and stable, e.g. "per-layer.pp2.smb8.1f1b.split22-18.tp4.z1.rc-none*30+tp4.z1.rc-full*10".
  std::string key() const override;
  // One line: "pp 2 (22+18 layers), 8 samples x 4 micro-batches, 1f1b: tp4.z1.rc-none x30, tp4.z1.rc-full x10".
  std::string summary() const override;
  nlohmann::json to_json() const override;
  // evaluate_per_layer (per_layer_search.hpp).
  Candidate evaluate(const Scenario& scenario, const Profile& profile, bool record_op_timings,
                     IterationGraph* graph) const override;
};

int stage_gpus(const Scenario& scenario, const PerLayerPlan& plan);
// The first transformer layer of stage `stage` when the stages hold `stage_layers` layers each (stage = the
// number of stages: all of them); PerLayerPlan::first_layer.
int first_layer_of_split(const std::vector<int>& stage_layers, int stage);
// A layer as the uniform strategy of its Megatron layout (its group as TP with SP whenever above 1, data
// parallel G / group, stage_micro_batch * group / G samples per micro-batch, at least 1; its ZeRO stage and
// recompute; the pipeline of the cluster's G-GPU stages): what layer_shapes prices (a Ulysses layer starts
// from it) and what twin execute runs a layer of a Megatron layout as.
Strategy megatron_layer_strategy(const Scenario& scenario, const LayerStrategy& layer, int stage_gpus,
                                 int stage_micro_batch);
// Tokens every GPU of a stage holds per micro-batch outside attention, whatever the layout.
std::int64_t tokens_per_gpu(const Scenario& scenario, const PerLayerPlan& plan);
// Megatron TP of a layer's weights: the layout's group, or 1 under Ulysses (weights whole).
int weight_tp(const LayerLayout& layout);
// The layout of the embedding or the output layer beside a layer of `layout`: a Megatron layout of the layer's
// weight_tp (the layer's own under TP; data parallel, whole weights on the GPU's own rows, beside Ulysses).
LayerLayout edge_layout(const LayerLayout& layout);

// How twin execute runs a unit of a per-layer plan: the uniform strategy its weights are laid out, reduced and
// gathered under (a Megatron layer's layout as TP x DP, megatron_layer_strategy, with the plan's micro-batches and
// schedule; a Ulysses layer's weights are whole and data parallel over the stage), the size of the group its
// tensors move in (its TP group, or the Ulysses group of its all-to-alls), and the shapes the lowering emits it with.
struct UnitExecution {
  Strategy weights;
  int group = 1;
  bool ulysses = false;
  lowering::RankShapes shapes;
};
// A layer of strategy `layer` (or, `edge`, the embedding or output layer beside it) on a stage of `stage_gpus`
// GPUs: what the lowering emits its ops and collectives from; micro-batches and schedule left unset.
UnitExecution stage_unit_execution(const Scenario& scenario, const LayerStrategy& layer, bool edge, int stage_gpus,
                                   int stage_micro_batch);
// The same for a layer of `plan`, with its micro-batches and schedule.
UnitExecution layer_execution(const Scenario& scenario, const PerLayerPlan& plan, int layer);
// The embedding (`embedding`) or the output layer, beside the first or the last layer.
UnitExecution edge_execution(const Scenario& scenario, const PerLayerPlan& plan, bool embedding);

// The samples of a stage micro-batch that GPU `gpu` of a stage works on under `layout`: those of its block
// (`group` consecutive GPUs), [first, first + count). The block cuts their rows into `group` contiguous
// runs; the GPU's is run gpu % group, rows [gpu T, (gpu + 1) T) of the micro-batch whatever the layout.
// Throws std::invalid_argument where the block's samples are not whole (stage_micro_batch * group / G).
struct BlockSamples {
  int first = 0, count = 0;
};
BlockSamples block_samples(const LayerLayout& layout, int stage_gpus, int stage_micro_batch, int gpu);

// Data-parallel (ZeRO) group of a layout: G / group for Megatron TP, all G for Ulysses (weights whole).
int data_group_of(const LayerLayout& layout, int stage_gpus);

// What one layer (or the embedding and output layer beside it) holds per GPU: model states after ZeRO,
// and the activations one micro-batch in flight keeps (Korthikanti, as memory.cpp counts them).
struct LayerMemory {
  double parameters = 0, gradients = 0, optimizer_states = 0, activations_per_pass = 0;
  double states() const { return parameters + gradients + optimizer_states; }
  void add(const LayerMemory& o) {
    parameters += o.parameters, gradients += o.gradients, optimizer_states += o.optimizer_states;
    activations_per_pass += o.activations_per_pass;
  }
};
LayerMemory layer_memory(const Scenario& scenario, const LayerStrategy& strategy, int layer, int stage_gpus,
                         int stage_micro_batch);
// The embedding (`embedding`) and the output layer (`output`) in the layout of `strategy`.
LayerMemory edge_memory(const Scenario& scenario, const LayerStrategy& strategy, bool embedding, bool output,
                        int pipeline_stages, int stage_gpus, int stage_micro_batch);
// An upper bound on what a stage holds besides its layers, whichever of `options` its layers take:
// the largest embedding/output layer, NCCL buffers of every communicator the options use, the ZeRO-3
// gather buffers, workspace.
double stage_fixed_bytes_bound(const Scenario& scenario, const std::vector<LayerStrategy>& options, int stage,
                               int pipeline_stages, int stage_gpus, int stage_micro_batch, int passes_in_flight);

// Memory per GPU of each stage, as estimate_memory() counts it, layer by layer.
MemoryEstimate estimate_per_layer_memory(const Scenario& scenario, const PerLayerPlan& plan);

// The op graphs of one iteration, one rank class per stage: each layer with its own TP/Ulysses group,
// data group, ZeRO collectives and recompute.
IterationGraph lower_per_layer_plan(const Scenario& scenario, const PerLayerPlan& plan);

// The plan's home strategy (its most common layer strategy, applied to every layer): complete and valid,
// what ranking.csv's strategy columns show.
Strategy home_strategy(const Scenario& scenario, const PerLayerPlan& plan);

// Tokens per second, MFU and HFU of an iteration of `iteration_s` (`home` the plan's home strategy): HFU counts
// each layer's own recompute.
Throughput per_layer_throughput(const Scenario& scenario, const PerLayerPlan& plan, const Strategy& home,
                                double iteration_s);

}  // namespace twin
