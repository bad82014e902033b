// Reading best.json back: the plan's scenario and pinned strategy (validated by the scenario parser), its
// format and lowering versions, and the whole document for the predicted numbers. Written by
// reports/best_plan.hpp; read by twin execute, traces and recalibration.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/scenario.hpp"
#include "core/strategy.hpp"

namespace twin {

inline constexpr int kPlanFormatVersion = 1;
// Bump when lowering changes the op graph a strategy gives: a plan of another version names other ops.
// 2 (2026-11-27): an MoE layer permutes its copies before the dispatch all-to-all and runs the combine all-to-all
// before the unpermute (Megatron's order), and under TP all-reduces the routing counts.
// 3 (2026-11-27): context parallelism's backward ring carries the key-value gradient one step behind the KV
// block and brings it home in a last exchange (cp + 1 exchanges, each after the block before it); ring ops say
// their step (Op::ring_step); each forward block's merge and each backward gradient add is an elementwise op of
// its own. An MoE layer under CP all-reduces its routing counts over CP too (after TP's).
// 4 (2026-11-27): a per-layer plan's layers of different layouts follow each other with no re-layout all-to-all
// (every layout holds the same rows on each GPU: strategies/per_layer/per_layer.hpp).
// 5 (2026-11-27): hot switching's accumulated gradients arrive at one GPU of each reduction group of the next
// layout, before the phase's first backward op of their unit, as the value its gradients start from; the
// elementwise accumulation after the phase is gone (strategies/hot_switch/hot_switch_resharding.hpp).
// 6 (2026-11-29): FP8 amax reductions as Transformer Engine runs them: delayed scaling's all-reduce over the amax
// group after each pass where TP x CP x DP is above 1, current scaling's over TP before each SP-gathered cast
// (op role fp8_amax; strategies/fp8_linears.hpp).
// 7 (2026-11-30): ops state their dropout (Op::dropout): a residual add its hidden dropout, counting the 1-byte mask
// in its bytes (7 per element forward, 11 backward: the add, then the branch's gradient through the mask), the
// embedding's ops theirs (priced with the mask), attention ops their attention dropout; a residual add states its
// rows and columns (tokens_local x hidden). Without dropout every op is priced as before.
// 8 (2026-11-30): under SP with one FP8 scale per tensor (tensorwise, delayed), the transpose of a gathered tensor's
// rows into the columnwise copy wgrad reads is an op of its own (OpKind::fp8_transpose, on the compute stream after
// the data gradient, before wgrad), no longer a flag of the gather (Op::fp8_columnwise). Plans without FP8 under SP
// lower as before.
// 9 (2026-11-30): ZeRO-2 and 3 reduce-scatter each unit's gradients in every micro-batch's backward (Megatron-FSDP's
// grad_reduce_every_bprop; lowering_emitter.hpp reduces_every_micro_batch), and twin execute keeps only their shard
// between micro-batches; before, once in a chunk's last micro-batch. Plans below ZeRO-2 lower as before.
// 10 (2026-12-03): the loss ops of `framework.cross_entropy_loss_fusion` false say so (Op::unfused_loss) and carry
// its passes' bytes (core/unfused_loss.hpp); the elementwise op of role loss after each is gone. Plans with the
// fused loss lower as before.
// 11 (2026-12-03): without gradient accumulation fusion each grad_accumulation op names its linear (Op::linear) and
// moves 2 + 2 x the main gradient's bytes per weight (framework.main_grad_dtype, by default the reduction's; 10
// before, fp32 always); the experts' and the router's weight gradients have one too; twin execute runs the dense
// linears'. Plans with the fusion lower as before.
inline constexpr int kLoweringVersion = 11;

// Columns of each entry of rank_classes[].ops, in order.
inline constexpr const char* kPlanOpColumns[] = {"op_id",  "kind",   "role",               "layer",
                                                 "micro_batch", "stream", "predicted_start_ns", "predicted_duration_ns"};

struct Plan {
  Scenario scenario;   // with scenario.strategy set to `strategy`
  Strategy strategy;
  std::string profile;
  nlohmann::json document;  // the whole file, for the predicted numbers and op list
};

// Throws InputError (file, JSON path, expectation) for unreadable, malformed or foreign files.
Plan read_plan(const std::filesystem::path& path);
Plan parse_plan(const nlohmann::json& document, const std::string& source);

}  // namespace twin
