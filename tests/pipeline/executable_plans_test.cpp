// Every shipped scenario's leading candidates through twin execute's plan check, without the search (about 70 s
// over all of them): the uniform candidates that fit, ordered by their lower bound (the order a pruned search
// simulates them in), the first ten of each; and the plans of the families (hot switching, per-layer,
// heterogeneous), whose searches take under a second but one: for it, the plan its search ranks first (pinned,
// tests/pipeline/fixtures/); and the first feasible candidate of every published configuration (tests/validation/).
// The check must give a verdict (an internal error, such as Qwen3's parameter count was, fails), and each is the one
// recorded here: a plan twin execute cannot run is never called executable.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/text_format.hpp"
#include "pipeline/executable_plans.hpp"
#include "pipeline/simulate_run.hpp"
#include "sim/price_cache.hpp"
#include "strategies/families/families.hpp"
#include "strategies/lower_bound.hpp"
#include "strategies/search.hpp"
#include "tests/cli/run_twin.hpp"
#include "validation/published_table.hpp"

namespace twin {
namespace {

const std::filesystem::path kSource = TWIN_SOURCE_DIR;

PreparedScenario prepared(const std::filesystem::path& path) {
  SimulateSettings quiet;
  quiet.quiet = true;
  return prepare_scenario(load_scenario(path), quiet);
}

std::vector<std::filesystem::path> shipped_scenarios() {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(kSource / "scenarios"))
    if (entry.path().extension() == ".json") out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The fitting uniform candidates with the lowest bounds, at most `count`.
std::vector<Candidate> leading_candidates(const PreparedScenario& run, std::size_t count) {
  std::vector<std::pair<TimeNs, Candidate>> bounded;
  sim::PriceCache prices;  // the candidates repeat each other's op shapes
  for (Candidate& c : enumerate_candidates(run.scenario))
    if (c.feasible) bounded.emplace_back(compute_lower_bound_ns(run.scenario, c.strategy, run.profile, &prices), std::move(c));
  std::stable_sort(bounded.begin(), bounded.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Candidate> out;
  for (std::size_t k = 0; k < std::min(count, bounded.size()); ++k) out.push_back(std::move(bounded[k].second));
  return out;
}

// The JSON path of the verdict: "" for "yes", the path of a refusal; fails for anything else.
std::string refusal_path_of(const std::string& verdict, const Candidate& candidate) {
  if (verdict == "yes") return "";
  const std::string prefix = "no: at /";
  EXPECT_EQ(verdict.rfind(prefix, 0), 0u) << candidate.key() << ": " << verdict;
  return verdict.substr(prefix.size() - 1, verdict.find(": ", prefix.size()) - prefix.size() + 1);
}
std::string refusal_path(const Scenario& scenario, const Candidate& candidate) {
  return refusal_path_of(executable_verdict(scenario, candidate), candidate);
}

// Where twin execute refuses each scenario's leading uniform candidates (every one of them); the others run.
// megatron-gpt-18.4b-256xA100 runs since 2026-11-30 (its LayerNorm, learned positions and biases since 2026-11-29,
// its hidden dropout and then its attention dropout inside cuDNN's fused attention on 2026-11-30, issue 42).
const std::map<std::string, std::string>& uniform_refusals() {
  static const std::map<std::string, std::string> paths = {
      {"llama3-70b-gb200-nvl72-fp8.json", "/scenario/training/fp8/recipe"},  // MXFP8
      {"llama3-8b-8xB200-fp8.json", "/scenario/training/fp8/recipe"},
      {"nemotron4-340b-256xH100.json", "/scenario/framework/tp_comm_overlap"},  // its LayerNorm runs
  };
  return paths;
}

// Where twin execute refuses `candidate` of scenario `name`: "" where it runs it. Qwen3's QK-norm runs at every TP
// (since 2026-11-30; at TP 1 only since 2026-11-29, refused at /scenario/model under TP; before, every candidate at
// /scenario/model/qk_layernorm).
std::string expected_refusal(const std::string& name, const Candidate& candidate) {
  // Expert TP is priced only (since 2026-11-29): refused at its key, whole experts run.
  if (name == "mixtral-8x7b-expert-tp-32xH100.json")
    return candidate.strategy.expert_tensor_parallel_size > 1 ? "/strategy/expert_tensor_parallel_size" : "";
  const auto refused = uniform_refusals().find(name);
  return refused == uniform_refusals().end() ? "" : refused->second;
}

TEST(ExecutablePlans, LeadingUniformCandidatesOfEveryShippedScenario) {
  int checked = 0;
  for (const std::filesystem::path& path : shipped_scenarios()) {
    const std::string name = path.filename().string();
    const PreparedScenario run = prepared(path);
    for (const Candidate& candidate : leading_candidates(run, 10)) {
      EXPECT_EQ(refusal_path(run.scenario, candidate), expected_refusal(name, candidate)) << name << ": " << candidate.key();
      ++checked;
    }
  }
  EXPECT_GT(checked, 150);
}

// The family plans twin execute refuses, by the path of the refusal: none since 2026-11-29. Refused before: the
// per-layer plans whose embedding or output layer beside a Ulysses layer holds part of a sample (at
// /family_plan/detail/stage_micro_batch); the heterogeneous plan whose home strategy (TP 2 x PP 3) divides no 16
// GPUs (at /strategy: its best.json was unreadable; it states the plan as a scenario pins it now); the hot-switching
// plan whose TP 4 phase pads the vocabulary further than its TP 2 phase (at
// /family_plan/detail/phases/1/strategy_fields: the switch moves the model's elements and leaves the new padding).
const std::map<std::string, std::set<std::string>>& family_refusals() {
  static const std::map<std::string, std::set<std::string>> paths = {};
  return paths;
}

TEST(ExecutablePlans, FamilyPlansOfEveryShippedScenario) {
  std::vector<std::filesystem::path> scenarios;
  for (const std::filesystem::path& path : shipped_scenarios())  // its hot-switching search takes 10 s: pinned below
    if (path.filename() != "llama2-7b-8xH100-hot-switch.json") scenarios.push_back(path);
  scenarios.push_back(kSource / "tests/pipeline/fixtures/llama2-7b-8xH100-hot-switch-pinned.json");
  std::map<std::string, std::set<std::string>> refused;
  int checked = 0;
  for (const std::filesystem::path& path : scenarios) {
    const PreparedScenario run = prepared(path);
    for (const FamilySearch& family : plan_families())
      for (const Candidate& candidate : family(run.scenario, run.profile, 1)) {
        if (!candidate.feasible) continue;
        ++checked;
        if (const std::string at = refusal_path(run.scenario, candidate); !at.empty())
          refused[path.filename().string()].insert(at);
      }
  }
  EXPECT_EQ(refused, family_refusals());
  EXPECT_GT(checked, 30);
}

// Where twin execute refuses the published configurations (tests/validation/*.json: each row's first feasible candidate;
// the rows' searches open little beside the micro-batch and SP), by the path of the refusal, with how many rows; "yes"
// and "not checked" (beyond the op limit) counted apart. The check must give a verdict on every one of them.
const std::map<std::string, int>& published_verdicts() {
  static const std::map<std::string, int> counts = {
      // An all-gathered context exchange (Llama 3's 128k row): the executor runs the ring.
      {"/scenario/framework/cp_comm_type", 1},
      // The loss on fp32 logits in passes of its own under TP (at TP 1 it runs since 2026-12-03; 145 rows refused here
      // that morning, 70 of them at /scenario/model/attention_backend before, unfused attention, which ran then); 10
      // until fp32 main gradients ran (2026-12-03), when NeMo's 175B rows reached it.
      {"/scenario/framework/cross_entropy_loss_fusion", 26},
      // The output layer's weight gradients deferred to the drain (priced only; since 2026-12-03 the DGX Cloud rows
      // state their recipes' deferral: Nemotron-4 340B's five of 24.11, which ran before, reach it first).
      {"/scenario/framework/defer_embedding_wgrad_compute", 5},
      {"/scenario/framework/scatter_gather_tensors_in_pipeline", 47},  // Megatron-LM 2021's pipeline sends
      // pytorch-fsdp2 and, since 2026-12-07, pytorch-fsdp (PyTorch's own kernels): LLM Foundry's 56 rows state the
      // framework they ran; 38 of them passed, and 18 reached ZeRO-2/3, while they said Megatron's.
      {"/scenario/framework/name", 63},  // 62 and 63 since NeMo AutoModel's Llama 3.1 70B and Qwen3 MoE 30B rows (2026-12-07)
      // A reduction in a dtype other than the main gradient's (NeMo 22.08's 5B: its fp32 buffer beside a bf16
      // reduction; 33 rows refused at reduce_dtype float32 and 11 at main_grad_dtype float32 before fp32 main
      // gradients ran, 2026-12-03).
      {"/scenario/framework/reduce_dtype", 5},
      {"/scenario/framework/tp_comm_overlap", 40},            // Transformer Engine's userbuffers
      // An expert capacity under expert parallelism (Qwen3 235B-A22B's token-drop run of 25.09, since 2026-12-06).
      {"/scenario/model/moe/expert_capacity_factor", 1},
      {"/scenario/model/mtp_num_layers", 1},                  // multi-token prediction
      // FP8 parameters (16 before the rows of 2026-12-06, 53 before MLPerf's H200 rows of 2026-12-07, 56 before its
      // H100 Llama 3.1 405B and 8B rows).
      {"/scenario/training/fp8/param_gather", 63},
      {"/scenario/training/fp8/recipe", 25},                  // MXFP8 (Blackwell; 2 before the rows of 2026-12-06)
      {"/scenario/training/precision", 9},                    // fp16 training (Megatron-LM of 2021)
      {"/strategy/recompute_modules", 4},                     // selective recompute of modules other than attention's
      // FP8 linears with biases under TP with SP (NeMo 24.07's GPT-3 20B and 175B, since 2026-12-06; NeMo 25.02's and
      // 25.04's GPT-3 175B the same night; MLPerf Training's 18 GPT-3 175B rows since 2026-12-07).
      {"/strategy/sequence_parallel", 23},
      // fp32 main gradients under ZeRO 2-3: Llama 3's 2 and LLM Foundry's H100 18 (these reached PyTorch's
      // early-stopping checkpoint first from 2026-12-04 until the executor ran it at TP 1, 2026-12-05); since
      // 2026-12-06 NeMo 24.07's eight FP8 rows with a distributed optimizer under data parallelism (GPT-3 5B's reached
      // FP8 linears beside hidden dropout first until those ran, the same night); 10 since 2026-12-07, LLM Foundry's
      // 18 refused by their framework's name first.
      {"/strategy/zero_stage", 10},
      {"not checked", 1},                                     // beyond the op limit
      // 11 since LLM Foundry's rows state PyTorch's FSDP1 (2026-12-07);
      // 49 since the deferred output-layer weight gradients are stated (2026-12-03); 54 since fp32 main gradients run
      // (2026-12-03); 53 since 2026-12-03 (the loss without fusion at TP 1); 15 since 2026-12-02 (the master as
      // parameter remainders); none before.
      {"yes", 11},
  };
  return counts;
}

TEST(ExecutablePlans, FirstCandidateOfEveryPublishedConfiguration) {
  std::map<std::string, int> verdicts;
  std::map<std::string, std::string> checked;  // by configuration: its verdict
  int rows = 0, counted = 0;
  for (const char* table : {"published.json", "moe_rows.json", "fp8_blackwell.json"})
    for (const PublishedRow& row : load_published_table(kSource / "tests/validation" / table).rows) {
      SimulateSettings quiet;
      quiet.quiet = true;
      const PreparedScenario run = prepare_scenario(row.scenario, quiet);
      ++rows;
      for (const Candidate& candidate : enumerate_candidates(run.scenario)) {
        if (!candidate.feasible) continue;
        // Two releases of a benchmark table often state one configuration: its verdict once.
        nlohmann::json described = to_json(run.scenario);
        described.erase("name");
        const auto [known, fresh] = checked.try_emplace(described.dump() + candidate.key());
        if (fresh) known->second = executable_verdict(run.scenario, candidate);
        const std::string& verdict = known->second;
        if (verdict == "yes" || verdict.rfind("not checked", 0) == 0)
          ++verdicts[verdict.substr(0, verdict.find(':'))];
        else
          ++verdicts[refusal_path_of(verdict, candidate)];
        ++counted;
        break;
      }
    }
  // One published run the memory model over-counts: tests/validation/validation_table_test.cpp kOverCounted.
  EXPECT_EQ(counted, rows - 1) << "a published configuration without a feasible candidate";
  EXPECT_EQ(verdicts, published_verdicts());
}

// twin simulate writes the verdict in ranking.csv: of the ten fastest (here all); the pinned plan's best runs.
TEST(ExecutablePlans, RankingCsvSaysWhetherTwinExecuteRunsEachOfTheFastest) {
  const test::TempDir dir("executable-plans");
  SimulateSettings settings;
  settings.out = dir.path / "out";
  settings.top = 0;
  settings.jobs = 1;
  settings.quiet = true;
  const std::string pinned = "tests/pipeline/fixtures/llama2-7b-8xH100-hot-switch-pinned.json";
  for (const std::string& scenario : {pinned, std::string("scenarios/llama2-7b-1xH200-hot-switch.json")}) {
    const SimulateOutcome outcome = simulate_scenario(load_scenario_input(kSource / scenario), settings);
    if (scenario == pinned) EXPECT_EQ(outcome.ranked.front().executable, "yes");  // TP 2 then TP 4
    const std::string csv = test::read_file(outcome.out / "ranking.csv");
    EXPECT_NE(csv.find(",replay,executable\r\n"), std::string::npos) << scenario;
    for (std::size_t k = 0; k < outcome.ranked.size(); ++k) {
      const Candidate& candidate = outcome.ranked[k];
      EXPECT_EQ(candidate.executable, k < 10 && candidate.feasible ? executable_verdict(outcome.scenario, candidate)
                                                                  : std::string())
          << scenario << ": " << candidate.key();
      EXPECT_NE(csv.find("," + csv_field(candidate.executable) + "\r\n"), std::string::npos) << candidate.key();
    }
  }
}

}  // namespace
}  // namespace twin
