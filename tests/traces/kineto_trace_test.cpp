// PyTorch profiler traces (traces/kineto_trace.hpp, kineto_classes.hpp, kineto_fold.hpp): one real step of
// tests/gpu/pytorch_fsdp_train.py on an H200 (fixtures/kineto_L4_mb1_step.json.gz, trimmed by
// fixtures/trim_kineto_trace.py), a hand-written trace in Megatron-LM / Transformer Engine's kernel naming, and
// malformed files.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "cost/profile.hpp"
#include "traces/kineto_classes.hpp"
#include "traces/kineto_fold.hpp"
#include "traces/kineto_trace.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;
const fs::path kFixture = fs::path(TWIN_SOURCE_DIR) / "tests/traces/fixtures/kineto_L4_mb1_step.json.gz";

fs::path written_kineto(const std::string& name, const std::string& text) {
  const fs::path folder = test::scratch_path("kineto");
  fs::create_directories(folder);
  const fs::path path = folder / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

double share(const ClassifiedTrace& t, TraceClass c) {
  return t.classes[static_cast<std::size_t>(c)].busy_ns / t.total_ns();
}

TEST(KinetoTrace, ARealStepOfFsdp2IsClassifiedWithShapes) {
  const KinetoTrace trace = read_kineto_trace(kFixture);
  EXPECT_EQ(trace.rank, 0);
  EXPECT_EQ(trace.world_size, 1);
  EXPECT_EQ(trace.device_name, "NVIDIA H200");
  ASSERT_EQ(trace.steps.size(), 1u);
  const ClassifiedTrace classified = classify_trace(trace);
  EXPECT_LT(share(classified, TraceClass::unmatched), 0.01);
  EXPECT_GT(share(classified, TraceClass::gemm), 0.4);  // Llama-2-7B widths at 4096 tokens: GEMMs dominate
  EXPECT_GT(share(classified, TraceClass::optimizer), 0.05);
  ASSERT_EQ(classified.steps.size(), 1u);
  EXPECT_GT(classified.steps[0].busy_ns, 0.5 * classified.steps[0].span_ns);
  EXPECT_EQ(classified.steps[0].collective_ns, 0);  // FSDP over one GPU calls no NCCL kernel
  bool square_gemm = false, cudnn_forward = false;
  for (const ShapedTraceOp& op : classified.shaped) {
    if (op.op.kind == OpKind::gemm && op.op.gemm.m == 4096 && op.op.gemm.n == 4096 && op.op.gemm.k == 4096)
      square_gemm = true;
    if (op.op.kind == OpKind::attention_forward) {
      EXPECT_EQ(op.op.attention.batch, 1);
      EXPECT_EQ(op.op.attention.heads, 32);
      EXPECT_EQ(op.op.attention.seq_q, 4096);
      EXPECT_EQ(op.op.attention.head_dim, 128);
      cudnn_forward = op.op.attention.cudnn;
    }
    EXPECT_GT(op.busy_ns, 0);
  }
  EXPECT_TRUE(square_gemm);  // the Q, K, V and output projections: [4096, 4096] x [4096, 4096]
  EXPECT_TRUE(cudnn_forward);
}

// Megatron-LM with Transformer Engine (--use-pytorch-profiler): TE's GEMMs run inside its autograd function
// _Linear (no aten::mm, no shape), attention in cuDNN's fused kernel, gradients all-reduced by NCCL beside the
// backward. Hand-written in those names: times in microseconds, two streams.
std::string megatron_trace() {
  const std::string x = R"j("ph": "X", "pid": 1, "tid": 1)j";
  const std::string gpu = R"j("ph": "X", "pid": 0)j";
  return std::string(R"j({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
    "traceEvents": [
    {)j") + x + R"j(, "cat": "user_annotation", "name": "ProfilerStep#7", "ts": 0, "dur": 100},
    {)j" + x + R"j(, "cat": "cpu_op", "name": "_Linear", "ts": 1, "dur": 5, "args": {"External id": 10}},
    {)j" + x + R"j(, "cat": "cpu_op", "name": "FusedAttnFunc", "ts": 7, "dur": 5, "args": {"External id": 11}},
    {)j" + x + R"j(, "cat": "cpu_op", "name": "record_param_comms", "ts": 13, "dur": 2, "args": {"External id": 12,
       "Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 8, "dtype": "BFloat16"}},
    {)j" + x + R"j(, "cat": "cpu_op", "name": "aten::add_", "ts": 16, "dur": 2, "args": {"External id": 13,
       "Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    {)j" + gpu + R"j(, "tid": 7, "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cublas",
       "ts": 20, "dur": 30, "args": {"External id": 10, "stream": 7, "correlation": 100}},
    {)j" + gpu + R"j(, "tid": 7, "cat": "kernel", "name": "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7",
       "ts": 50, "dur": 20, "args": {"External id": 11, "stream": 7, "correlation": 101}},
    {)j" + gpu + R"j(, "tid": 20, "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
       "ts": 60, "dur": 20, "args": {"External id": 12, "stream": 20, "correlation": 102}},
    {)j" + gpu + R"j(, "tid": 7, "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>(int)",
       "ts": 75, "dur": 5, "args": {"External id": 13, "stream": 7, "correlation": 103}},
    {)j" + gpu + R"j(, "tid": 7, "cat": "kernel", "name": "void transformer_engine::rmsnorm_fwd_kernel<float>(void)",
       "ts": 90, "dur": 4, "args": {"stream": 7, "correlation": 104}}
  ]})j";
}

TEST(KinetoTrace, MegatronKernelNamesAreClassifiedAndTheRestCounted) {
  const ClassifiedTrace t = classify_trace(read_kineto_trace(written_kineto("megatron_rank3.json", megatron_trace())));
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.world_size, 8);
  const auto ns = [&](TraceClass c) { return t.classes[static_cast<std::size_t>(c)].busy_ns; };
  EXPECT_EQ(ns(TraceClass::gemm), 30e3);
  EXPECT_EQ(ns(TraceClass::attention_forward), 20e3);
  EXPECT_EQ(ns(TraceClass::collective), 20e3);
  EXPECT_EQ(ns(TraceClass::memory_bound), 5e3);
  EXPECT_EQ(ns(TraceClass::unmatched), 4e3);  // no External id, no runtime call: counted, not dropped
  EXPECT_TRUE(t.shaped.empty());  // TE's _Linear and FusedAttnFunc record no shapes: nothing exact to fold
  const auto& gemm = t.classes[static_cast<std::size_t>(TraceClass::gemm)].matched_on;
  ASSERT_EQ(gemm.size(), 1u);
  EXPECT_NE(gemm.begin()->first.find("kernel name sm90_xmma_gemm"), std::string::npos);
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].span_ns, 74e3);                   // 20 us to 94 us
  EXPECT_EQ(t.steps[0].busy_ns, 64e3);  // 20 to 80 us, 90 to 94 us
  EXPECT_EQ(t.steps[0].collective_ns, 20e3);
  EXPECT_EQ(t.steps[0].collective_overlapped_ns, 15e3);  // beside the attention until 70 us and the add at 75-80
}

// A GEMM with its shape (aten::mm) whose kernel ran partly beside an NCCL kernel on another stream (FSDP2's
// all-gather beside the compute): the classes keep how long, and the fold takes that part at its time alone.
TEST(KinetoTrace, AGemmBesideNcclKeepsHowLongItRanBesideIt) {
  const std::string x = R"j("ph": "X", "pid": 1, "tid": 1)j";
  const std::string gpu = R"j("ph": "X", "pid": 0)j";
  const std::string text = std::string(R"j({"deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
    "traceEvents": [
    {)j") + x + R"j(, "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 0, "dur": 100},
    {)j" + x + R"j(, "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 5, "args": {"External id": 10,
       "Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    {)j" + x + R"j(, "cat": "cpu_op", "name": "nccl:_all_gather_base", "ts": 7, "dur": 2, "args": {"External id": 11}},
    {)j" + gpu + R"j(, "tid": 7, "cat": "kernel", "name": "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NTN",
       "ts": 20, "dur": 40, "args": {"External id": 10, "stream": 7, "correlation": 100}},
    {)j" + gpu + R"j(, "tid": 20, "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
       "ts": 50, "dur": 30, "args": {"External id": 11, "stream": 20, "correlation": 101}}
  ]})j";
  const ClassifiedTrace t = classify_trace(read_kineto_trace(written_kineto("beside_nccl.json", text)));
  ASSERT_EQ(t.shaped.size(), 1u);
  EXPECT_EQ(t.shaped[0].busy_ns, 40e3);
  EXPECT_EQ(t.shaped[0].beside_collective_ns, 10e3);  // 50 to 60 us
}

TEST(KinetoTrace, MalformedFilesAreNamedWithWhere) {
  const auto error_of = [](const fs::path& path) {
    try {
      read_kineto_trace(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(written_kineto("text.json", "not json")).find("a JSON Chrome trace"), std::string::npos);
  EXPECT_NE(error_of(written_kineto("no_events.json", R"({"schemaVersion": 1})")).find("/traceEvents"),
            std::string::npos);
  const std::string bad_ts = R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1}]})";
  EXPECT_NE(error_of(written_kineto("bad_ts.json", bad_ts)).find("/traceEvents/0/ts"), std::string::npos);
  // A number beyond double (found by the fuzzer in CI): an input error, not nlohmann's out_of_range.
  const std::string huge = R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 11e400, "dur": 1}]})";
  EXPECT_NE(error_of(written_kineto("huge.json", huge)).find("finite numbers"), std::string::npos);
  std::string gz;
  {
    std::ifstream in(kFixture, std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = error_of(written_kineto("cut.json.gz", gz.substr(0, gz.size() / 2)));
  EXPECT_NE(cut.find("cut.json.gz"), std::string::npos);
  EXPECT_EQ(error_of(test::scratch_path("kineto") / "missing.json").find("no error"), std::string::npos);
}

// The fixture folded into the built-in profile, written to FOLDER/NAME (a fresh folder), with `scenario` if given.
KinetoFoldOutcome fold_fixture(const fs::path& folder, const std::string& name, const std::string& scenario = "") {
  fs::create_directories(folder);
  KinetoFoldRequest request;
  request.trace = kFixture;
  request.out = (folder / name).string();
  request.scenario = scenario;
  return fold_kineto_trace(request);
}

TEST(KinetoFold, FoldsShapesNamesTheFrameworkAndIsDeterministic) {
  const fs::path folder = test::scratch_path("fold");
  fs::remove_all(folder);
  const KinetoFoldOutcome first = fold_fixture(folder, "a.json");
  fold_fixture(folder, "b.json");
  const auto text = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(text(folder / "a.json"), text(folder / "b.json"));
  const Profile folded = load_profile((folder / "a.json").string());
  EXPECT_EQ(folded.framework, FrameworkName::pytorch_fsdp2);
  EXPECT_EQ(folded.step_facts.at("steps"), 1);
  const GpuKernelProfile& h200 = folded.kernels_for(*gpu_preset("H200-141GB"));
  EXPECT_TRUE(h200.measured.contains("gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0"));
  EXPECT_GT(first.record.at("effect").at("ops_folded").get<int>(), 20);
}

TEST(KinetoFold, TheScenarioOfTheTracedRunSetsTheMemoryBoundPrior) {
  const fs::path folder = test::scratch_path("fold_scenario");
  fs::remove_all(folder);
  const KinetoFoldOutcome outcome = fold_fixture(
      folder, "p.json", (fs::path(TWIN_SOURCE_DIR) / "docs/accuracy/pytorch-fsdp2-1xH200/scenarios/L4_mb1_none.json").string());
  const nlohmann::json& priors = outcome.record.at("effect").at("priors");
  ASSERT_TRUE(priors.contains("memory_bound"));
  EXPECT_FALSE(priors.contains("gemm"));  // GEMMs came with shapes: exact entries, no prior
  // eager PyTorch runs unfused norms and casts, FSDP2 casts every fp32 parameter each step
  EXPECT_GT(priors.at("memory_bound").at("new").get<double>(), priors.at("memory_bound").at("old").get<double>());
  const Profile folded = load_profile((folder / "p.json").string());
  EXPECT_EQ(folded.kernels_for(*gpu_preset("H200-141GB")).in_situ_prior.memory_bound,
            priors.at("memory_bound").at("new").get<double>());
}

}  // namespace
}  // namespace twin
