// Asymmetric plans (HexiScale): several pipelines, each its own batch share and stages, each stage its own
// devices, TP size and layers. What the lowering, the memory check, the search and the report share:
// where each stage's layers lie, how gradients are reduced across pipelines that shard layers
// differently, each stage's memory, and the plan as a candidate holds it (key, summary and JSON).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "strategies/memory.hpp"
#include "strategies/search.hpp"

namespace twin {

// Units of weights in model order: -1 the input embedding, 0..L-1 the layers, L the output layer.
// Stage s of a pipeline holds units [first_unit, end_unit): its layers, the embedding when first and
// the output layer when last.
struct StageUnits {
  int first_unit = 0;
  int end_unit = 0;
};
std::vector<StageUnits> stage_units(const ModelConfig& model, const AsymmetricPipeline& pipeline);
// The unit in model order of an op's or a weight's parameter unit (core/op.hpp: kEmbeddingUnit, a layer, kHeadUnit).
int model_order_unit(const ModelConfig& model, std::int32_t parameter_unit);

// Cross-pipeline gradient reduction. Every pipeline holds every unit, on stages cut at different layers
// with different TP sizes, so the reduction works per segment: a maximal run of units that one stage of
// each pipeline holds whole (the cuts of all pipelines together). A segment's gradients are reduced by a
// ring over the pipelines, reduce-scatter then all-gather (2(P-1) steps): in step k every pipeline's
// stage sends 1/P of its own shard to the next pipeline's stage, each GPU its own TP shard of it, so a
// GPU of a TP-t stage moves 2(P-1)/P * bytes/t and the receiving stage's GPUs their own share.
struct GradientSegment {
  int first_unit = 0;
  int end_unit = 0;
  std::vector<int> stage_of_pipeline;  // the stage of pipeline p that holds the segment
};
std::vector<GradientSegment> gradient_segments(const ModelConfig& model, const std::vector<AsymmetricPipeline>& plan);

// A ring op's tag (its pair of send and receive): the segment and the step (0 .. 2(P-1) - 1: the reduce-scatter's
// P - 1 steps, then the all-gather's). The op says its segment and step itself (Op::ring_segment, Op::ring_step).
std::int64_t ring_tag(int segment, int step, int pipelines);

// Bytes of gradients (2 per parameter) of the segment's units one GPU of a TP-`tp` stage holds.
// `single_stage`: the pipeline has one stage (a tied output layer then shares the embedding's weights).
Bytes segment_gradient_bytes(const ModelConfig& model, const GradientSegment& segment, int tp, bool single_stage);
// Bytes one GPU sends in each ring step: its shard over the pipelines, rounded up.
Bytes ring_step_bytes(Bytes shard_bytes, int pipelines);

// Parameters one GPU of the stage holds (its TP shard of its units).
std::int64_t stage_parameters(const ModelConfig& model, const AsymmetricPipeline& pipeline, int stage);

// The uniform strategy a stage looks like on its own: tp = the stage's, pp = the pipeline's stages,
// dp 1, the pipeline's micro-batches, the shared sequence_parallel, recompute and schedule.
Strategy stage_strategy(const Strategy& shared, const AsymmetricPipeline& pipeline, int stage);

// Memory per GPU of stage `stage`: the memory model of a uniform pipeline of the same depth whose
// stages all hold this stage's layer count (strategies/memory.hpp), with ZeRO-1 sharding the optimizer
// states over the `pipelines` replicas. Dense models (layers alike) only.
MemoryBreakdown asymmetric_stage_memory(const Scenario& scenario, const Strategy& shared,
                                        const AsymmetricPipeline& pipeline, int stage, int pipelines);
// Every stage's memory against its own GPUs'; `memory` gets one entry per stage, pipeline by pipeline.
// Empty when it fits, else "out of memory: 41.2 GiB > 40.0 GiB on pipeline 1 stage 0 (A100-SXM-40GB)".
std::string asymmetric_out_of_memory_reason(const Scenario& scenario, const Strategy& shared,
                                            const std::vector<AsymmetricPipeline>& plan, MemoryEstimate& memory);

// "hetero.p0[d0+8:tp8/L40]mbs1x24.p1[d8+4:tp4/L20,...]mbs1x8.sp.z0.rc-none.1f1b" (stable, unique per plan).
std::string asymmetric_plan_key(const Strategy& shared, const std::vector<AsymmetricPipeline>& plan);

// An asymmetric plan as a candidate holds it (family "heterogeneous"): the shared fields, the pipelines and
// the GPU of each stage, so that it names and describes itself without the scenario.
struct AsymmetricPlan final : FamilyPlan {
  Strategy shared;
  std::vector<AsymmetricPipeline> pipelines;
  std::vector<std::vector<std::string>> stage_gpus;  // [pipeline][stage]: the GPU of the stage's first device

  std::string family() const override { return "heterogeneous"; }
  std::string key() const override { return asymmetric_plan_key(shared, pipelines); }
  // "2 pipelines: 1 x24 [H100x8:tp8/L40] | 1 x8 [A100-40GB x4:tp4/L20 > ...]"
  std::string summary() const override;
  // The shared fields, `pipelines` in the scenario format and `stage_gpus`.
  nlohmann::json to_json() const override;
  // The plan as a scenario pins it (strategy.pipelines): its home strategy, pipeline 0's first stage with the
  // pipelines as replicas, is no strategy of the cluster (TP 2 x PP 3 x 3 pipelines on 16 GPUs).
  std::optional<nlohmann::json> plan_file_strategy() const override;
  Candidate evaluate(const Scenario& scenario, const Profile& profile, bool record_op_timings,
                     IterationGraph* graph) const override;
};
AsymmetricPlan asymmetric_plan(const Scenario& scenario, const Strategy& shared,
                               const std::vector<AsymmetricPipeline>& pipelines);

// One rank class per (pipeline, stage), pipeline by pipeline: each stage priced on its own GPU kind and
// links, pipeline transfers between stages (over the network between nodes), the cross-pipeline ring
// per gradient segment as the last micro-batch's backward frees it, then the optimizer.
IterationGraph lower_asymmetric_plan(const Scenario& scenario, const Strategy& shared,
                                     const std::vector<AsymmetricPipeline>& plan);

// Tokens per second, MFU and HFU of an iteration of `iteration_s`, counting the peaks of the GPUs the plan uses.
Throughput asymmetric_throughput(const Scenario& scenario, const Strategy& shared,
                                 const std::vector<AsymmetricPipeline>& plan, double iteration_s);

// About how many ops the graph of a plan holds whose `pipelines` run `micro_batches` in all (one graph holds every
// pipeline): their passes as strategies/validity.hpp counts them, and the gradient rings over the pipelines (a send
// and a receive per step and pipeline, per segment), which grow with the square of the pipelines.
std::int64_t asymmetric_op_count(const Scenario& scenario, const Strategy& shared, std::int64_t micro_batches,
                                 std::int64_t pipelines);
// The reason such a plan is refused (beyond kMaxOpsPerCandidate: its size and how to narrow it), or nullopt.
// Checked before a plan is priced or lowered.
std::optional<std::string> asymmetric_too_many_ops_reason(const Scenario& scenario, const Strategy& shared,
                                                          std::int64_t micro_batches, std::int64_t pipelines);

// Lowers, simulates and measures the plan: a feasible candidate of family "heterogeneous" (or an
// infeasible one with the reason: too many ops, or memory). Throughput counts the peaks of the GPUs the plan uses.
Candidate evaluate_asymmetric_plan(const Scenario& scenario, const Profile& profile, const Strategy& shared,
                                   const std::vector<AsymmetricPipeline>& plan, bool record_op_timings,
                                   IterationGraph* graph = nullptr);

}  // namespace twin
