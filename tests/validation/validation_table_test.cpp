// The published-results table (docs/VALIDATION.md) predicted whole with the built-in profile, each group with
// the fitted parameters refitted without it: a regression guard on the cross-validated mean and largest error
// of every group and of the table (the in-sample ones beside them), at what they reached plus half a point.
// Also the table's reading and the FLOP formulas behind its TFLOP/s and MFU figures.
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/error.hpp"
#include "core/text_format.hpp"
#include "cost/fitted_parameters.hpp"
#include "validation/cross_validation.hpp"

namespace twin {
namespace {

const std::string kTable = std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json";
const std::string kMoeTable = std::string(TWIN_SOURCE_DIR) + "/tests/validation/moe_rows.json";

TEST(PublishedTable, FiguresBecomeTheIterationTimesTheirSourcesImply) {
  const PublishedTable table = load_published_table(kTable);
  ASSERT_GE(table.rows.size(), 200u);
  std::map<std::string, const PublishedRow*> by_id;
  for (const PublishedRow& row : table.rows) by_id[row.id] = &row;
  // Narayanan et al. eq. 3 over 137 TFLOP/s on 32 GPUs: 3.53 s (the transcription's derived value).
  EXPECT_NEAR(by_id.at("narayanan21_t1_1.7B")->published_iteration_s, 3.53, 0.01);
  // Korthikanti et al.: MFU 54.2% of 312 TFLOP/s on 2,240 GPUs, their 72 B s l h^2 (...) model FLOPs.
  EXPECT_NEAR(by_id.at("korthikanti22_530B_2240gpu_selective_plus_sp")->published_iteration_s, 39.12, 0.01);
  // Megatron-LM README: 408.8 TFLOP/s per GPU with Megatron's formula of July 2024 on 48 GPUs: 0.4519 s.
  EXPECT_NEAR(by_id.at("megatron_gpt_1p7b_48gpu")->published_iteration_s, 0.4519, 0.0005);
  // LLM Foundry: 6,291,456 tokens / (9,670 tokens/s/GPU x 512 GPUs) = 1.2707 s.
  EXPECT_NEAR(by_id.at("mpt_7b_h100_512gpu_seq2048")->published_iteration_s, 1.2707, 0.0005);
  // Narayanan et al. Table 2: DeepSpeed ZeRO-3 at 44 TFLOP/s per GPU on 1,536 GPUs, by the same eq. 3: 66.75 s.
  EXPECT_NEAR(by_id.at("narayanan21_t2_zero3_174.6B_1536gpu")->published_iteration_s, 66.75, 0.01);
  // torchtitan: 512 sequences of 8192 tokens / (597.3 tokens/s per GPU x 256 GPUs) = 27.43 s.
  EXPECT_NEAR(by_id.at("torchtitan_llama3_70b_256h100_fsdp32_tp8_bf16")->published_iteration_s, 27.43, 0.01);
  // torchtitan's performance page of 2024: 32 sequences of 8192 tokens / (109 WPS per GPU x 128 GPUs) = 18.79 s.
  EXPECT_NEAR(by_id.at("torchtitan_llama31_405b_128h100_fsdp16_tp8_bf16")->published_iteration_s, 18.79, 0.01);
  // Table 5 as published.
  EXPECT_EQ(by_id.at("korthikanti22_1T_selective_plus_sp")->published_iteration_s, 71.49);
  // NeMo Megatron: 40,345 tokens/s on one DGX A100 (5,043.1 per GPU), batch 2048 x 2048: 103.96 s.
  EXPECT_NEAR(by_id.at("nemo_gpt3_5b_8gpu")->published_iteration_s, 103.96, 0.01);
  // BLOOM's logged iteration as published.
  EXPECT_EQ(by_id.at("bloom_176b_384gpu")->published_iteration_s, 104.70);
  // NVIDIA's DGX Cloud Benchmarking prints the step time itself; Nemotron-4's MLP is squared ReLU.
  const PublishedRow& nemotron = *by_id.at("dgxc_nemotron4_15b_16gpu_2411");
  EXPECT_EQ(nemotron.published_iteration_s, 2.83);
  EXPECT_EQ(nemotron.scenario.model.activation, Activation::squared_relu);
}

TEST(PublishedTable, BadRowsNameTheirPath) {
  nlohmann::json document = nlohmann::json::parse(std::ifstream(kTable));
  document["rows"][3]["published"]["metric"] = "tokens_per_day";
  try {
    parse_published_table(document, "t.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/rows/3/published/metric") << e.what();
  }
  document = nlohmann::json::parse(std::ifstream(kTable));
  document["rows"][5]["scenario"]["model"]["hidden_size"] = -1;
  try {
    parse_published_table(document, "t.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/rows/5/scenario/model/hidden_size") << e.what();
  }
  document = nlohmann::json::parse(std::ifstream(kTable));
  document["rows"][1]["id"] = document["rows"][0]["id"];
  EXPECT_THROW(parse_published_table(document, "t.json"), InputError);
}

// The guard, leave one group out (docs/VALIDATION.md, "Cross-validated: leave one group out"): mean and largest
// |error| of each group predicted with the fitted parameters refitted without it, and beside them the in-sample
// figures (every parameter fitted on every group), as measured on 2026-11-29 01:51-01:55 UTC
// (`twin validate tests/validation/published.json --cross-validate`, 206 rows of 16 groups, with NCCL's bandwidth
// ceilings in the tuner, sim/nccl_caps.hpp, and the pace of rings across nodes, sim/ring_pace.hpp; each figure
// rounded up to the tenth of a point), lowered where DeepSpeed's memory passes around its collectives
// (strategies/deepspeed_zero3.hpp) improved them on 2026-11-29 04:01-04:12 UTC and left as they were where those moved
// a figure up within the half point, and lowered where NeMo Megatron's rows as its 22.08 and 22.06 releases ran them
// (209 rows, 2026-11-29 16:38-16:45 UTC) improved them, left where those moved a figure up within the half point; then set to the figures of the table whose
// Megatron-LM rows of 2021-22 state the scatter/gather of pipeline tensors their code ran (2026-11-29 20:50-20:58 UTC,
// docs/VALIDATION.md "Megatron-LM's scatter/gather of pipeline tensors"): every figure is that run's, rounded up; four
// moved up (BLOOM-176B 4.2% -> 5.1%, torchtitan's A100 rows 13.1% -> 13.7%, NeMo's A100 rows 11.9% -> 12.1%, the
// Narayanan Table 1 max 15.3% -> 15.9%) because the one Ampere factor, refitted in every fold, no longer absorbs the
// Megatron rows' over-priced pipeline sends: a row described as it ran beats a guard figure that leaned on a wrong
// one. Lowered where BLOOM's rows stated as DeepSpeed ran them (its pipeline engine's partitioned tensors on every BLOOM
// row, its BF16_Optimizer on the production run; 2026-11-29 22:46-22:50 UTC, docs/VALIDATION.md "DeepSpeed's
// BF16_Optimizer") improved them, left where those moved a figure up within the half point (the Ampere factor, refitted
// without BLOOM-176B's 5% of over-priced communication, 1.2891 -> 1.2937 in-sample: Narayanan's, Korthikanti's,
// torchtitan's A100 and NeMo's A100 rows 0.2-0.4 point worse). Raised on 2026-11-30 (02:35-02:41 UTC, branch
// `dropout`, this test's own run) for the three groups of Megatron-LM's GPT rows, which train with hidden dropout 0.1:
// their residual adds now move the 1-byte dropout mask as Megatron's bias-dropout-add does (7 bytes per element
// forward, 11 backward, were 6 and 6) and their embedding's dropout is priced (docs/EXECUTOR.md "Dropout"); those rows
// were already predicted slow (+2% to +16%, Narayanan's Table 1), so describing what ran moved them 0.5-1.0 point up:
// Narayanan Table 1 7.7/15.9/6.9/15.0% -> 8.7/16.5/7.9/15.5%, Korthikanti Table 5 10.5/14.5/9.7/13.6% ->
// 11.1/15.1/10.3/14.2%, Korthikanti's abstract 7.2/8.8/7.1/8.6% -> 7.6/9.5/7.5/9.3%. Lowered on 2026-11-30 (05:05-05:07
// UTC, branch `pub37`) where the groups whose framework reduced bf16 gradients in fp32 state framework.reduce_dtype
// float32 (docs/VALIDATION.md "Gradients reduced in fp32"): Llama 3, the Megatron-LM README's H100 rows, LLM Foundry's
// H100 rows, and the DGX Cloud rows through the Hopper factor refitted beside them; torchtitan's H100 rows moved up
// within the half point (13.8% -> 14.0%) and are left. A change that makes any of them worse by more than half a point
// fails here. A group the guard does not know fails with the line to add. Raised on 2026-11-30 (17:20 UTC, main) for
// the Megatron-LM README's H100 rows (GPT-style, GeLU): the shape space compared a norm, loss or attention op with
// the measured shapes by the model's activation and attention backend too, which their keys do not name, so every
// non-activation kernel of a GeLU model was priced by the curves alone; priced by the measured shapes now, its largest
// row moved 11.1% -> 11.8% held out (in-sample 10.6% -> 11.4%), its mean 6.7% -> 6.8%; the table 7.60% -> 7.65%
// (docs/VALIDATION.md "The variant bug of GeLU models"). Set on 2026-11-30 (19:55 UTC, main) to the figures of the
// graph in which ZeRO-2/3 reduce-scatter every micro-batch's gradients, as Megatron-FSDP, DeepSpeed, PyTorch FSDP and
// LLM Foundry's Composer (which sets no no_sync under FSDP) run them and as twin execute now keeps only their shards:
// Llama 3's rows (ZeRO-2, as the paper states FSDP sharding gradients) 4.9% -> 20.5% held out, LLM Foundry's H100 rows
// 8.1% -> 9.2%, the Megatron-LM README's H100 rows 6.8% -> 7.3% and torchtitan's H100 row 13.8% -> 14.6% through the
// Hopper factor refitted beside them; the DGX Cloud and 2021-22 Megatron rows moved down; the table 7.65% -> 7.8%.
// The 4.9% priced Llama 3 with one reduction a step (ZeRO-1's graph) and ZeRO-2's memory, a run no framework makes;
// its rows reduced once a step as PyTorch's pipelining drives FSDP (docs/VALIDATION.md "ZeRO-2/3 in every
// micro-batch"), which twin describes as ZeRO-1, out of memory there (84.1 GiB > 79.6): left open.
// Set on 2026-12-01 (00:48 UTC, main) where unfused attention is priced as its kernels (cost/unfused_attention.hpp:
// the backward's four products, twice the forward's FLOPs, and seven passes, not 2.5 times the forward's FLOPs and
// eight): Narayanan Table 1 8.6% -> 8.1%, NeMo's A100 rows 12.2% -> 11.7%, Korthikanti's rows 0.1-0.2 point up through
// the Ampere factor; the table 7.77% -> 7.72% (docs/VALIDATION.md "Unfused attention as its kernels").
// Lowered on 2026-12-02 (10:55 UTC) where a weight gradient written into or added to an fp32 buffer prices its wider
// write (Op::gemm_output; docs/ACCURACY.md "Weight gradients that accumulate"): the Megatron-LM README's H100 rows
// (fp32 reduction, ZeRO-1) 7.3% -> 6.7% held out, in-sample 7.0% -> 6.3%; the others within 0.1 point; the table
// 7.72% -> 7.68%.
// Set on 2026-12-03 (10:09 UTC) where the main gradient has a dtype of its own (framework.main_grad_dtype: the
// reduction's by default, as Megatron's DDP allocates main_grad; NeMo 22.06-22.08's fp32 buffer stated) and a weight
// gradient added outside the GEMM moves 2 + 2 x its bytes (16-bit in fp16 training: 6, where 10 was priced): Narayanan
// Table 1 8.1% -> 7.5%, its ZeRO-3 rows 13.5% -> 12.5%; the Ampere factor, refitted, rises and takes Korthikanti's
// rows 0.7 point up, and MT-NLG's fp16 rows, cheaper too, 8.4% -> 10.5%; the table 7.663% -> 7.669% (docs/VALIDATION.md
// "The main gradient's dtype"). At 11:32 UTC NeMo 22.06's three rows state their fp32 reduction (the O2 wrapper's
// GradBucket): that group 11.8% -> 12.0%.
// Lowered on 2026-12-03 (18:3x UTC) where the DGX Cloud rows of Llama 3.1 70B and 405B and Nemotron-4 340B state
// their recipes' deferred output-layer weight gradients (framework.defer_embedding_wgrad_compute, wgrad_deferral_limit
// 22, 50, 22): the 24.11 group 5.4% -> 4.9% held out (max 14.7% -> 12.1%), and through the Hopper factor refitted
// beside it the Megatron-LM README's, LLM Foundry's and torchtitan's H100 rows 0.2-0.3 point; Llama 3's rows moved up
// 20.4% -> 20.6%, within the half point, and are left; the table 7.667% -> 7.541% (docs/VALIDATION.md "The output
// layer's deferred weight gradients").
// Raised on 2026-12-04 (18:4x UTC) where full recompute stops early under PyTorch's non-reentrant checkpoint
// (framework.checkpoint_early_stop: pytorch-fsdp2's default, stated on LLM Foundry's H100 rows, which pinned torch 2.1;
// measured on one H200 at 0.75-0.84 of a forward against 0.97-1.14 without, tests/gpu/recompute_cost_pytorch.py):
// LLM Foundry's H100 rows with checkpointing fall 6-7 points and now sit with the rows without it (-9.7..-14.5% against
// -10.5..-14.3% held out, where the split was 7 points), the group 9.0% -> 12.1%; torchtitan's H100 row 14.5% -> 19.1%
// and its A100 rows with checkpointing +16/+17% -> +10/+11%; through the Hopper factor refitted beside them the DGX
// Cloud groups 0.6-0.8 point; the table 7.5% -> 8.0% held out. A measured mechanism whose removal of a cancelling error
// shows what PyTorch-native H100 runs still lack (docs/VALIDATION.md "PyTorch's checkpoint stops early").
// Set on 2026-12-07 (03:58 UTC) where LLM Foundry's rows state the framework they ran, PyTorch's FSDP1 in eager mode
// (framework.name pytorch-fsdp: eager PyTorch's kernels and host time, FSDP1's passes around its collectives; before,
// Megatron's fused kernels priced them; the A100 rows, on torch 1.13.1, without the checkpoint's early stop): LLM
// Foundry's H100 rows 9.5% -> 7.1% held out, its A100 rows 6.4% -> 6.4% (max 21.7% -> 19.9%), the DGX Cloud groups
// 0.5 point better, the Megatron-LM A100 groups 0.4-0.5 point better through the Ampere factor refitted beside them
// (in-sample 1.3014 -> 1.2954), MT-NLG 10.3% -> 10.7%, torchtitan's H100 row 20.4% -> 20.7%; the table 7.3% -> 6.9%
// held out, 6.8% -> 6.5% in-sample (docs/VALIDATION.md "LLM Foundry's rows as the framework they ran"). 2026-12-07
// 13:20-13:21 UTC (the same machine): NeMo AutoModel's Llama 3.1 70B row (FSDP2 with CP 2 on 64 H100s, its own group,
// +15.9% held out); the Hopper factor refitted beside it moves the other Hopper groups by 0.1-0.2 point; the table
// 6.9% / 34.3% held out over 209 rows (docs/VALIDATION.md "NeMo AutoModel's Llama 3.1 70B").
struct Reached {
  double cross_validated_mean, cross_validated_max, in_sample_mean, in_sample_max;
};
const std::map<std::string, Reached> kReached = {
    {"narayanan2021-table1", {0.071, 0.141, 0.065, 0.134}},
    {"korthikanti2022-table5", {0.115, 0.157, 0.106, 0.147}},
    {"korthikanti2022-abstract", {0.081, 0.099, 0.079, 0.098}},
    {"dubey2024-llama3-table4", {0.195, 0.263, 0.191, 0.260}},
    {"megatron-readme-h100-2024", {0.052, 0.088, 0.050, 0.085}},
    {"llmfoundry-mpt-h100-2024", {0.072, 0.115, 0.059, 0.102}},
    {"llmfoundry-mpt-a100-2023", {0.064, 0.199, 0.062, 0.205}},
    {"nemo-megatron-a100-2023", {0.122, 0.198, 0.122, 0.196}},
    {"bloom2022-176b", {0.003, 0.003, 0.003, 0.003}},
    {"bloom2022-topology-search", {0.082, 0.255, 0.079, 0.247}},
    {"smith2022-mtnlg-530b", {0.107, 0.127, 0.104, 0.125}},
    {"dgxc-nemo-h100-24.11", {0.036, 0.111, 0.031, 0.100}},
    {"dgxc-nemo-h100-25.02", {0.022, 0.054, 0.019, 0.048}},
    {"narayanan2021-table2-zero3", {0.124, 0.343, 0.126, 0.341}},
    {"torchtitan-h100-2025", {0.208, 0.208, 0.206, 0.206}},
    {"torchtitan-perf-2024", {0.127, 0.186, 0.124, 0.185}},
    {"automodel-h100-2026", {0.159, 0.159, 0.157, 0.157}},
    {"all", {0.069, 0.343, 0.065, 0.341}},
};

// The same for the published MoE rows (issue 40), a table of their own: `twin validate tests/validation/moe_rows.json
// --cross-validate`, 13 rows of 5 groups, 2026-11-28 21:30 UTC, after the overlapped EP schedule and the capacity
// factor; 2026-11-29 14:04 UTC after the flex dispatcher's deduplicated exchange (24.4% -> 13.4% held out); 14:45 UTC
// with grouped GEMMs priced as their calls too (13.4% -> 11.4%; 26.06's one row -0.6% -> -1.4%, 26.02's max +0.1;
// docs/VALIDATION.md "MoE rows"). 2026-11-29 16:52-16:56 UTC (branch `recmod`): DeepSeek-V3's H100 row joins as its own
// group once twin models its recipe's recompute_modules, and the GPT-OSS rows state theirs (layernorm, moe_act); 14
// rows of 6 groups, 11.4% -> 13.1% held out. The 13 rows' predictions at the built-in values are unchanged (the GPT-OSS
// rows' +1.3% aside); the other groups' held-out figures moved because each group's fit set now holds the DeepSeek-V3
// row too (26.06 1.4% -> 4.2%, 26.02 max 43.4% -> 45.3%; 26.02.01 8.1% -> 6.9%, 26.04.01 max 21.6% -> 18.8%): the
// table changed, not the model of those rows, so the figures are the new table's. 2026-12-04 15:01 UTC: the rows state
// framework.name megatron-core and GPT-OSS's experts run Megatron-Core's eager clamp and FC2 bias, priced as measured
// on an H200 (strategies/megatron_expert_passes.hpp): 13.1% -> 12.5% held out, 19.1% -> 13.0% at the built-in values
// (GPT-OSS -25..-27% -> -4..-7%); 26.06 (4.4% -> 12.7%), 26.02.01 (7.1% -> 7.5%) and 26.02's max (44.8% -> 49.0%)
// rose with no prediction of theirs moving: the Hopper factor, refitted on the table's other rows, falls once the
// GPT-OSS rows no longer ask for slower compute (docs/VALIDATION.md "Megatron-Core's eager expert kernels").
const std::map<std::string, Reached> kReachedMoe = {
    // 2026-12-06 23:30 UTC: Qwen3 235B-A22B's rows of 25.11 (dropless, forced balance) and 25.09 (token drop) join: 16
    // rows of 7 groups, 13.7% -> 12.4% held out; the other groups moved up to 0.5 point through the refit.
    // 2026-12-07 13:37 UTC: NeMo AutoModel's Qwen3 MoE 30B row (PyTorch FSDP2 with EP 8 and Transformer Engine's
    // kernels) joins as its own group, +30.8% held out: the Hopper factor its fold fits on Megatron-Bridge's rows (1.55)
    // is the MoE table's, where at the built-in 1.27 it is +10.9%; 17 rows, 12.4% -> 13.0%; 26.06 15.6% -> 17.4% and
    // 26.02's max 49.3% -> 50.5% through the refit, the other groups 0.5-0.9 point better (docs/VALIDATION.md "NeMo
    // AutoModel's MoE rows").
    {"megatron-bridge-25.09-h100-moe", {0.128, 0.225, 0.126, 0.213}},
    {"megatron-bridge-26.06-h100-moe", {0.174, 0.174, 0.164, 0.164}},
    {"megatron-bridge-26.04.01-h100-moe", {0.103, 0.151, 0.103, 0.151}},
    {"megatron-bridge-26.04-h100-moe", {0.098, 0.158, 0.098, 0.157}},
    {"megatron-bridge-26.02.01-h100-moe", {0.072, 0.093, 0.071, 0.095}},
    {"megatron-bridge-26.02-h100-moe", {0.196, 0.505, 0.208, 0.489}},
    {"megatron-bridge-25.11-h100-moe", {0.058, 0.058, 0.057, 0.057}},
    {"automodel-h100-2026-moe", {0.308, 0.308, 0.277, 0.277}},
    {"all", {0.130, 0.505, 0.129, 0.489}},
};

// The same for the FP8 and Blackwell rows (issue 41), a table of their own: `twin validate
// tests/validation/fp8_blackwell.json --cross-validate`, 9 rows of 4 groups, 2026-11-29 04:16 UTC. The Blackwell
// groups stand 6-7 points worse than on 2026-11-28 14:03 UTC, a move no guard caught: they take the built-in Hopper
// in-training factor, refit on the main table since (docs/VALIDATION.md "FP8 and Blackwell rows"); from here they may
// only get better.
const std::map<std::string, Reached> kReachedFp8 = {
    // 2026-12-06 22:20 UTC: 59 rows more (68 of 15 groups), every Megatron-Bridge release of the archive at 067f987 its
    // own group (the GB300 rows of 26.06 join its Blackwell group, named 26.06-gb200 before), and NeMo 24.07's H100
    // FP8 table (docs/VALIDATION.md "FP8 and Blackwell rows"). 23:55 UTC: NeMo 25.02/25.04/25.07's Blackwell rows
    // (81 rows of 18 groups), and delayed scaling's amax all-reduces on the compute stream instead of behind the
    // data-parallel stream's reductions (NeMo 24.07 13.7% -> 11.6%, 25.02's Nemotron-4 340B +80.7% -> +5.8%).
    // 2026-12-07 00:39 UTC: pipeline receives posted ahead under delayed scaling too (they waited for the amax reduction
    // of the pass before): NeMo 24.07 11.6% -> 8.4%, the H100 FP8 rows 8.2% -> 6.1%, all 9.3% -> 8.7%.
    // 2026-12-07 06:09 UTC: MLPerf Training's H200 rows (84 of 20 groups), the table's first H200 GPUs; too fast at the
    // factor the other groups fit, they pull the Hopper factor up in every fold, and NeMo 24.07's rows, too slow
    // already, move 8.4% -> 9.0% held out (docs/VALIDATION.md "MLPerf Training's H100 and H200 rows").
    // 2026-12-07 06:28 UTC: MLPerf Training's H100 rows (107 of 25 groups): GPT-3 175B on 256 to 10,752 H100s (rounds
    // v3.0-v4.1) and Llama 3.1 405B on 512 to 8,192 (v5.0); every MLPerf row's figure is now the lower median of its
    // first run's printed step times. 06:39 UTC: Cisco's Llama 3.1 8B on 64 and 128 H100s (v5.1), 21-33% too fast
    // held out (109 rows of 26 groups): the H100 FP8 rows 6.3% held out, the table 8.6% -> 8.1%.
    {"megatron-bridge-25.11-h100-fp8", {0.053, 0.082, 0.052, 0.082}},
    {"megatron-bridge-26.06-h100-fp8", {0.001, 0.001, 0.001, 0.001}},
    {"megatron-bridge-25.11-blackwell", {0.085, 0.173, 0.085, 0.173}},
    {"megatron-bridge-26.06-blackwell", {0.093, 0.160, 0.093, 0.160}},
    {"megatron-bridge-26.04.01-blackwell", {0.090, 0.182, 0.090, 0.182}},
    {"megatron-bridge-26.04.01-h100-fp8", {0.009, 0.013, 0.009, 0.013}},
    {"megatron-bridge-26.04-blackwell", {0.090, 0.157, 0.090, 0.157}},
    {"megatron-bridge-26.04-h100-fp8", {0.006, 0.006, 0.006, 0.006}},
    {"megatron-bridge-26.02.01-blackwell", {0.108, 0.169, 0.108, 0.169}},
    {"megatron-bridge-26.02.01-h100-fp8", {0.003, 0.003, 0.003, 0.003}},
    {"megatron-bridge-26.02-blackwell", {0.097, 0.204, 0.097, 0.204}},
    {"megatron-bridge-26.02-h100-fp8", {0.031, 0.048, 0.030, 0.047}},
    {"megatron-bridge-25.09-blackwell", {0.133, 0.331, 0.133, 0.331}},
    {"megatron-bridge-25.09-h100-fp8", {0.029, 0.051, 0.029, 0.050}},
    {"nemo-24.07-h100-fp8", {0.095, 0.183, 0.077, 0.161}},
    {"nemo-25.02-blackwell", {0.112, 0.194, 0.112, 0.194}},
    {"nemo-25.04-blackwell", {0.093, 0.186, 0.093, 0.186}},
    {"nemo-25.07-blackwell", {0.053, 0.076, 0.053, 0.076}},
    {"mlperf-training-v5.0-h200-fp8", {0.057, 0.058, 0.055, 0.056}},
    {"mlperf-training-v5.1-h200-fp8", {0.003, 0.003, 0.003, 0.003}},
    {"mlperf-training-v3.0-h100-fp8", {0.092, 0.100, 0.084, 0.091}},
    {"mlperf-training-v3.1-h100-fp8", {0.059, 0.095, 0.050, 0.088}},
    {"mlperf-training-v4.0-h100-fp8", {0.035, 0.035, 0.035, 0.035}},
    {"mlperf-training-v4.1-h100-fp8", {0.042, 0.057, 0.041, 0.056}},
    {"mlperf-training-v5.0-h100-fp8", {0.004, 0.016, 0.004, 0.016}},
    {"mlperf-training-v5.1-h100-fp8", {0.268, 0.325, 0.260, 0.318}},
    {"all", {0.081, 0.331, 0.078, 0.331}},
};

// 2026-12-05 19:03-19:10 UTC, all three maps: h100-x1 re-shipped from a calibration with its sustained-clock curve and
// the Hopper factor refitted (1.2676 -> 1.2723; docs/VALIDATION.md "h100-x1 re-shipped"): the published table 8.0% ->
// 7.3% held out, FP8/Blackwell 9.8% -> 7.3%, the MoE rows 12.5% -> 13.7% (every MoE group but 26.04.01's max worse).

// What the guard finds wrong with the summaries of a cross-validation (held out and in-sample, group by group
// in the same order) against `reached`: a figure worse by more than half a point, or a group it does not know,
// with the line to add for it.
std::vector<std::string> guard_failures(const std::vector<GroupSummary>& held_out,
                                        const std::vector<GroupSummary>& fitted,
                                        const std::map<std::string, Reached>& reached) {
  std::vector<std::string> failures;
  const auto check = [&](const std::string& group, const char* what, double value, double limit) {
    if (value > limit + 0.005)
      failures.push_back(fmt::format("{}: {} {:.1f}%, was {:.1f}%", group, what, 100 * value, 100 * limit));
  };
  for (std::size_t i = 0; i < held_out.size(); ++i) {
    const GroupSummary &h = held_out[i], &f = fitted[i];
    const auto known = reached.find(h.group);
    if (known == reached.end()) {
      failures.push_back(fmt::format("a group the guard does not know: {}; add its figures to kReached: "
                                     "{{\"{}\", {{{}, {}, {}, {}}}}}",
                                     h.group, h.group, fixed(h.mean_abs_error, 3), fixed(h.max_abs_error, 3),
                                     fixed(f.mean_abs_error, 3), fixed(f.max_abs_error, 3)));
      continue;
    }
    check(h.group, "cross-validated mean |error|", h.mean_abs_error, known->second.cross_validated_mean);
    check(h.group, "cross-validated max |error|", h.max_abs_error, known->second.cross_validated_max);
    check(h.group, "in-sample mean |error|", f.mean_abs_error, known->second.in_sample_mean);
    check(h.group, "in-sample max |error|", f.max_abs_error, known->second.in_sample_max);
  }
  return failures;
}

TEST(ValidationTableGuard, NamesAGroupItDoesNotKnowWithTheFiguresToAddAndAFigureThatGotWorse) {
  const std::vector<GroupSummary> held_out = {{"narayanan2021-table1", 10, 0.036, 0.062, 0.0},
                                              {"new-group-2026", 4, 0.0412, 0.0817, 0.01}};
  const std::vector<GroupSummary> fitted = {{"narayanan2021-table1", 10, 0.030, 0.057, 0.0},
                                            {"new-group-2026", 4, 0.0306, 0.0699, 0.0}};
  // A guard of its own, so that the live kReached can move without this test.
  const std::map<std::string, Reached> reached = {{"narayanan2021-table1", {0.030, 0.062, 0.030, 0.057}}};
  EXPECT_EQ(guard_failures(held_out, fitted, reached),
            (std::vector<std::string>{"narayanan2021-table1: cross-validated mean |error| 3.6%, was 3.0%",
                                      "a group the guard does not know: new-group-2026; add its figures to kReached: "
                                      "{\"new-group-2026\", {0.041, 0.082, 0.031, 0.070}}"}));
  EXPECT_TRUE(guard_failures({held_out[0]}, {fitted[0]}, {{"narayanan2021-table1", {0.036, 0.062, 0.030, 0.057}}})
                  .empty());
}

// Published runs the memory model declares out of memory, with the reason (each ran: the model over-counts there).
// NeMo 22.08's 5B on one DGX A100 (TP 1, no recompute, micro-batch 2): its fp32 main gradient, Apex
// DistributedFusedAdam's contiguous grad buffer (float32 only at Apex 6f7d8ac3), counted since 2026-12-03 puts the
// estimate at 80.02 GiB of 80.0: the run fit, so the model over-counts by at least 1.1% there (docs/VALIDATION.md
// "The main gradient held in its dtype").
const std::map<std::string, std::string> kOverCounted = {{"nemo_gpt3_5b_8gpu", "out of memory: 80.0 GiB > 80.0 GiB"}};

// Cross-validates `file` and fails on every figure worse than `reached` by more than half a point.
void expect_errors_stay(const std::string& file, const std::map<std::string, Reached>& reached) {
  const PublishedTable table = load_published_table(file);
  const CrossValidation cv = cross_validate(table, builtin_profile(), builtin_fitted_parameters(), {});
  for (const RowPrediction& r : cv.held_out) {
    const auto known = kOverCounted.find(r.row->id);
    if (known == kOverCounted.end())
      EXPECT_TRUE(r.feasible) << r.row->id << ": " << r.reason;
    else  // when it fits again, the list and docs/VALIDATION.md say so
      EXPECT_EQ(r.reason.substr(0, known->second.size()), known->second) << r.row->id;
  }
  const std::vector<GroupSummary> held_out = summarize(cv.held_out), fitted = summarize(cv.fitted);
  for (std::size_t i = 0; i < held_out.size(); ++i)
    std::printf("%-28s %2d rows  cross-validated mean |error| %.1f%%  max %.1f%%  in-sample %.1f%%  max %.1f%%\n",
                held_out[i].group.c_str(), held_out[i].rows, 100 * held_out[i].mean_abs_error,
                100 * held_out[i].max_abs_error, 100 * fitted[i].mean_abs_error, 100 * fitted[i].max_abs_error);
  for (const std::string& failure : guard_failures(held_out, fitted, reached)) ADD_FAILURE() << failure;
}

TEST(ValidationTable, CrossValidatedErrorsStayWhereTheyAre) { expect_errors_stay(kTable, kReached); }

TEST(ValidationTable, MoeRowsCrossValidatedErrorsStayWhereTheyAre) { expect_errors_stay(kMoeTable, kReachedMoe); }

TEST(ValidationTable, Fp8AndBlackwellRowsCrossValidatedErrorsStayWhereTheyAre) {
  expect_errors_stay(std::string(TWIN_SOURCE_DIR) + "/tests/validation/fp8_blackwell.json", kReachedFp8);
}

}  // namespace
}  // namespace twin
