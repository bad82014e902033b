// The measured Chrome trace of one rank: pid = rank, one tid per CUDA stream named after the op streams
// it served, events named after their ops with exact ns offsets from the origin, deterministic bytes.
#include "traces/measured_trace.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/traces/measured_kernels.hpp"
#include "traces/chrome_trace.hpp"

namespace twin {
namespace {

using testing::kBaseNs;
using testing::stage0_kernels;
using testing::two_stage_graph;

std::vector<nlohmann::json> measured_events_with(const nlohmann::json& trace, const std::string& ph) {
  std::vector<nlohmann::json> found;
  for (const auto& event : trace["traceEvents"])
    if (event["ph"] == ph) found.push_back(event);
  return found;
}

std::string thread_name(const nlohmann::json& trace, std::uint32_t tid) {
  for (const auto& event : measured_events_with(trace, "M"))
    if (event["name"] == "thread_name" && event["tid"] == tid) return event["args"]["name"];
  return "none";
}

int thread_sort_index(const nlohmann::json& trace, std::uint32_t tid) {
  for (const auto& event : measured_events_with(trace, "M"))
    if (event["name"] == "thread_sort_index" && event["tid"] == tid) return event["args"]["sort_index"];
  return -1;
}

TEST(MeasuredTrace, OneThreadPerCudaStreamNamedByItsOpStreams) {
  const nlohmann::json trace = measured_chrome_trace(two_stage_graph().classes[0], 2, stage0_kernels(), "tp2.pp2");
  EXPECT_EQ(thread_name(trace, testing::kComputeStream), "compute (stream 7)");
  EXPECT_EQ(thread_name(trace, testing::kCommStream), "tp+dp (stream 13)");  // TP all-reduce and DP reduce-scatter
  EXPECT_EQ(thread_name(trace, testing::kPipelineStream), "pp_send+pp_recv (stream 21)");
  EXPECT_EQ(thread_name(trace, testing::kSetupStream), "stream 3");  // only a kernel outside any op
  EXPECT_EQ(thread_sort_index(trace, testing::kComputeStream), 0);
  EXPECT_EQ(thread_sort_index(trace, testing::kCommStream), 1);
  EXPECT_EQ(thread_sort_index(trace, testing::kPipelineStream), 2);
  EXPECT_EQ(thread_sort_index(trace, testing::kSetupStream), 3);
  EXPECT_EQ(measured_events_with(trace, "M").size(), 3u + 2u * 4u);  // process name/sort/labels + 2 per thread
  for (const auto& event : trace["traceEvents"]) EXPECT_EQ(event["pid"], 2);
  const auto process = measured_events_with(trace, "M").front();
  EXPECT_EQ(process["name"], "process_name");
  EXPECT_EQ(process["args"]["name"], "stage 0 (rank 2)");
}

TEST(MeasuredTrace, KernelEventsCarryTheirOpAndExactOffsets) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];
  const nlohmann::json trace = measured_chrome_trace(stage0, 2, stage0_kernels(), "tp2.pp2");
  const auto complete = measured_events_with(trace, "X");
  ASSERT_EQ(complete.size(), stage0_kernels().size());
  // Sorted by start: iteration 3's first GEMM kernel is the origin.
  const nlohmann::json& first = complete[0];
  EXPECT_EQ(first["name"], op_name(stage0.op(0)));
  EXPECT_EQ(first["name"], "L0.fc1.fwd.mb0");
  EXPECT_EQ(first["cat"], "gemm");
  EXPECT_EQ(first["tid"], testing::kComputeStream);
  EXPECT_EQ(first["args"]["op_id"], "c0.0");
  EXPECT_EQ(first["args"]["op_index"], 0);
  EXPECT_EQ(first["args"]["kernel"], "sm90_gemm_a");
  EXPECT_EQ(first["args"]["iteration"], 3);
  EXPECT_EQ(first["ts"], 0);
  EXPECT_EQ(trace["otherData"]["origin_ns"], kBaseNs);
  EXPECT_EQ(trace["otherData"]["kernels_outside_ops"], 1);
  // Every event is one record: same kernel, stream, start and duration to the nanosecond.
  const std::vector<MeasuredKernel> kernels = stage0_kernels();
  for (const auto& event : complete) {
    const auto matches = std::count_if(kernels.begin(), kernels.end(), [&](const MeasuredKernel& k) {
      return std::llround(event["ts"].get<double>() * 1000) == k.start_ns - kBaseNs &&
             std::llround(event["dur"].get<double>() * 1000) == k.end_ns - k.start_ns &&
             event["tid"] == k.stream_id && event["args"]["kernel"] == k.name;
    });
    EXPECT_EQ(matches, 1) << event.dump();
  }
  // Iteration 4's recv (c0.4): 100'000 + 2700 ns after the origin, 2500 ns long.
  const auto recv = std::find_if(complete.begin(), complete.end(), [](const nlohmann::json& e) {
    return e["args"]["op_id"] == "c0.4" && e["args"]["iteration"] == 4;
  });
  ASSERT_NE(recv, complete.end());
  EXPECT_EQ(std::llround((*recv)["ts"].get<double>() * 1000), 102'700);
  EXPECT_EQ(std::llround((*recv)["dur"].get<double>() * 1000), 2500);
  EXPECT_EQ((*recv)["name"], "pipeline_gradient.recv.mb0");
  const auto memset = std::find_if(complete.begin(), complete.end(), [](const nlohmann::json& e) {
    return e["name"] == "memset";
  });
  ASSERT_NE(memset, complete.end());
  EXPECT_EQ((*memset)["cat"], "kernel");
  EXPECT_FALSE((*memset)["args"].contains("op_id"));
  EXPECT_EQ(std::llround((*memset)["ts"].get<double>() * 1000), 6700);
}

TEST(MeasuredTrace, EventsAreInStartOrderAndBytesIgnoreInputOrder) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];
  std::vector<MeasuredKernel> kernels = stage0_kernels();
  const std::string forward = chrome_trace_text(measured_chrome_trace(stage0, 0, kernels, "t"));
  std::reverse(kernels.begin(), kernels.end());
  std::rotate(kernels.begin(), kernels.begin() + 5, kernels.end());
  const nlohmann::json shuffled = measured_chrome_trace(stage0, 0, kernels, "t");
  EXPECT_EQ(chrome_trace_text(shuffled), forward);
  double previous = -1;
  for (const auto& event : measured_events_with(shuffled, "X")) {
    EXPECT_GE(event["ts"].get<double>(), previous);
    previous = event["ts"].get<double>();
  }
  // 100'000 ns after the origin with 3 decimals in µs: the text keeps the nanoseconds.
  EXPECT_NE(forward.find("\"ts\":102.7}"), std::string::npos);
}

TEST(MeasuredTrace, AGivenOriginAlignsRanks) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage1 = graph.classes[1];
  const nlohmann::json trace = measured_chrome_trace(stage1, 4, testing::stage1_kernels(), "t", kBaseNs - 1234);
  const auto complete = measured_events_with(trace, "X");
  ASSERT_FALSE(complete.empty());
  EXPECT_EQ(std::llround(complete[0]["ts"].get<double>() * 1000), 1234);
  EXPECT_EQ(trace["otherData"]["origin_ns"], kBaseNs - 1234);
  EXPECT_EQ(trace["otherData"]["rank_class"], 1);
  EXPECT_NE(chrome_trace_text(trace).find("\"ts\":1.234}"), std::string::npos);
}

TEST(MeasuredTrace, OutOfRangeOpIsRejected) {
  std::vector<MeasuredKernel> kernels = stage0_kernels();
  kernels.push_back(testing::kernel("stray", 3, 9, 0, 1, 7));
  EXPECT_THROW(measured_chrome_trace(two_stage_graph().classes[0], 0, kernels, "t"), std::invalid_argument);
}

TEST(MeasuredTrace, WrittenFileIsTheTraceText) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("twin_measured_trace_test_" + std::to_string(::getpid()) + ".json");
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];
  write_measured_chrome_trace(path, stage0, 0, stage0_kernels(), "t");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), chrome_trace_text(measured_chrome_trace(stage0, 0, stage0_kernels(), "t")));
  EXPECT_TRUE(nlohmann::json::parse(text.str()).is_object());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace twin
