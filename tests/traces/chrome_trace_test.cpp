// The Chrome trace of a hand-built two-stage iteration: layout (pid = rank, tid = stream), metadata,
// exact µs timestamps, matched pipeline flows, and byte-for-byte determinism.
#include "traces/chrome_trace.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/traces/two_stage_graph.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

using testing::two_stage_graph;
using testing::two_stage_result;

std::vector<nlohmann::json> events_with(const nlohmann::json& trace, const std::string& ph) {
  std::vector<nlohmann::json> found;
  for (const auto& event : trace["traceEvents"])
    if (event["ph"] == ph) found.push_back(event);
  return found;
}

const nlohmann::json& op_event(const nlohmann::json& trace, const std::string& id) {
  for (const auto& event : trace["traceEvents"])
    if (event["ph"] == "X" && event["args"]["op_id"] == id) return event;
  throw std::runtime_error("no event for " + id);
}

TEST(ChromeTrace, OneCompleteEventPerOpOnItsRankAndStream) {
  const IterationGraph graph = two_stage_graph();
  const nlohmann::json trace = chrome_trace(graph, two_stage_result(), "tp2.pp2");
  const auto complete = events_with(trace, "X");
  ASSERT_EQ(complete.size(), 12u);
  const nlohmann::json& fc1 = op_event(trace, "c0.0");
  EXPECT_EQ(fc1["pid"], 0);
  EXPECT_EQ(fc1["tid"], static_cast<int>(Stream::compute));
  EXPECT_EQ(fc1["name"], op_name(graph.classes[0].op(0)));
  EXPECT_EQ(fc1["cat"], "gemm");
  EXPECT_EQ(fc1["args"]["role"], "fc1");
  EXPECT_EQ(fc1["args"]["layer"], 0);
  EXPECT_EQ(fc1["args"]["micro_batch"], 0);
  EXPECT_EQ(fc1["args"]["stage"], 0);
  EXPECT_DOUBLE_EQ(fc1["args"]["flops"].get<double>(), 2.0 * 4096 * 11008 * 4096);
  const nlohmann::json& tp = op_event(trace, "c0.1");
  EXPECT_EQ(tp["tid"], static_cast<int>(Stream::tp_comm));
  EXPECT_EQ(tp["args"]["group"], "tensor");
  EXPECT_EQ(tp["args"]["bytes"], 32 * 1024 * 1024);
  const nlohmann::json& attention = op_event(trace, "c1.1");
  EXPECT_EQ(attention["pid"], 4);  // stage 1's representative rank
  EXPECT_EQ(attention["args"]["stage"], 1);
}

TEST(ChromeTrace, TimestampsAreMicrosecondsWithExactNanoseconds) {
  const IterationGraph graph = two_stage_graph();
  const IterationResult result = two_stage_result();
  const nlohmann::json trace = chrome_trace(graph, result, "t");
  for (const RankClass& rank_class : graph.classes) {
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const nlohmann::json& event = op_event(trace, op_id(rank_class.index, i));
      const OpTiming& t = result.classes[rank_class.index].op_timings[i];
      EXPECT_EQ(std::llround(event["ts"].get<double>() * 1000), t.start_ns);
      EXPECT_EQ(std::llround(event["dur"].get<double>() * 1000), t.end_ns - t.start_ns);
    }
  }
  // c0.3 runs 5000..6001 ns: 5 µs for 1.001 µs, written with at most 3 decimals.
  const std::string text = chrome_trace_text(trace);
  EXPECT_NE(text.find("\"dur\":1.001"), std::string::npos);
  EXPECT_NE(text.find("\"ts\":6.001"), std::string::npos);
}

TEST(ChromeTrace, LargeTimesKeepNanosecondPrecisionInText) {
  IterationGraph graph;
  graph.classes.resize(1);
  graph.classes[0].add(testing::make_op(OpKind::gemm, OpRole::fc2, Stream::compute, 3, 1));
  IterationResult result;
  result.classes.resize(1);
  result.classes[0].op_timings = {{123456789012345, 123456789999999}};
  const std::string text = chrome_trace_text(chrome_trace(graph, result, "t"));
  EXPECT_NE(text.find("\"ts\":123456789012.345"), std::string::npos) << text;
  EXPECT_NE(text.find("\"dur\":987.654"), std::string::npos) << text;
}

TEST(ChromeTrace, NamesProcessesAndOnlyTheStreamsInUse) {
  const nlohmann::json trace = chrome_trace(two_stage_graph(), two_stage_result(), "t");
  std::map<int, std::string> process_names;
  std::map<int, std::vector<int>> threads;
  for (const auto& event : events_with(trace, "M")) {
    if (event["name"] == "process_name") process_names[event["pid"]] = event["args"]["name"];
    if (event["name"] == "thread_name") {
      threads[event["pid"]].push_back(event["tid"]);
      EXPECT_EQ(event["args"]["name"], to_string(static_cast<Stream>(event["tid"].get<int>())));
    }
  }
  ASSERT_EQ(process_names.size(), 2u);
  EXPECT_EQ(process_names[0], "stage 0 (rank 0, 1 of 4 identical ranks)");
  EXPECT_EQ(process_names[4], "stage 1 (rank 4, 1 of 4 identical ranks)");
  const auto s = [](Stream stream) { return static_cast<int>(stream); };
  EXPECT_EQ(threads[0], (std::vector<int>{s(Stream::compute), s(Stream::tp_comm), s(Stream::dp_comm),
                                          s(Stream::pp_send), s(Stream::pp_recv)}));
  EXPECT_EQ(threads[4], (std::vector<int>{s(Stream::compute), s(Stream::pp_send), s(Stream::pp_recv)}));
}

TEST(ChromeTrace, EveryPipelineSendFlowsToItsReceive) {
  const nlohmann::json trace = chrome_trace(two_stage_graph(), two_stage_result(), "t");
  const auto starts = events_with(trace, "s");
  const auto finishes = events_with(trace, "f");
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  // Activation: c0.2 send (1500 ns) -> c1.0 recv ending at 2250 ns; the head sits 1 ns inside it.
  EXPECT_EQ(starts[0]["pid"], 0);
  EXPECT_EQ(starts[0]["tid"], static_cast<int>(Stream::pp_send));
  EXPECT_DOUBLE_EQ(starts[0]["ts"].get<double>(), 1.5);
  EXPECT_EQ(finishes[0]["id"], starts[0]["id"]);
  EXPECT_EQ(finishes[0]["pid"], 4);
  EXPECT_EQ(finishes[0]["tid"], static_cast<int>(Stream::pp_recv));
  EXPECT_EQ(finishes[0]["bp"], "e");
  EXPECT_DOUBLE_EQ(finishes[0]["ts"].get<double>(), 2.249);
  EXPECT_EQ(starts[0]["name"], "pipeline_activation");
  // Gradient: c1.3 send (4000 ns) -> c0.4 recv ending at 5000 ns.
  EXPECT_EQ(starts[1]["pid"], 4);
  EXPECT_EQ(finishes[1]["pid"], 0);
  EXPECT_EQ(finishes[1]["id"], starts[1]["id"]);
  EXPECT_NE(starts[0]["id"], starts[1]["id"]);
  EXPECT_DOUBLE_EQ(finishes[1]["ts"].get<double>(), 4.999);
}

TEST(ChromeTrace, OtherDataNamesSourceAndStrategy) {
  const nlohmann::json trace = chrome_trace(two_stage_graph(), two_stage_result(), "tp2.pp2.cp1");
  EXPECT_EQ(trace["otherData"]["source"], "twin simulate");
  EXPECT_EQ(trace["otherData"]["strategy"], "tp2.pp2.cp1");
  EXPECT_EQ(trace["otherData"]["iteration_ns"], 7000);
  EXPECT_EQ(trace["displayTimeUnit"], "ns");
}

TEST(ChromeTrace, SameInputGivesSameBytesAndTextParsesBack) {
  const std::string first = chrome_trace_text(chrome_trace(two_stage_graph(), two_stage_result(), "t"));
  const std::string second = chrome_trace_text(chrome_trace(two_stage_graph(), two_stage_result(), "t"));
  EXPECT_EQ(first, second);
  EXPECT_EQ(nlohmann::json::parse(first), chrome_trace(two_stage_graph(), two_stage_result(), "t"));
}

// The writer prints op events without building them as JSON objects: each line must be exactly what
// nlohmann::json prints for the object it parses to (keys sorted, shortest numbers), as it was when it did.
TEST(ChromeTrace, EveryEventLineIsTheCanonicalTextOfItsObject) {
  const std::string text = chrome_trace_text(chrome_trace(two_stage_graph(), two_stage_result(), "t"));
  std::istringstream lines(text);
  int events = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.front() != '{' || line.size() < 2) continue;
    if (line.back() == ',') line.pop_back();
    if (line == "{") continue;
    const nlohmann::json event = nlohmann::json::parse(line);
    EXPECT_EQ(line, event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    events += event["ph"] == "X";
  }
  EXPECT_EQ(events, static_cast<int>(two_stage_graph().total_ops()));
}

TEST(ChromeTrace, RefusesResultsWithoutOpTimings) {
  IterationResult result = two_stage_result();
  result.classes[1].op_timings.clear();
  EXPECT_THROW(chrome_trace(two_stage_graph(), result, "t"), std::invalid_argument);
}

TEST(ChromeTrace, WriterLeavesOnlyTheFinishedFile) {
  const auto directory = test::scratch_path("chrome");
  std::filesystem::create_directories(directory);
  const auto path = directory / "trace.json";
  write_chrome_trace(path, two_stage_graph(), two_stage_result(), "t");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), chrome_trace_text(chrome_trace(two_stage_graph(), two_stage_result(), "t")));
  EXPECT_FALSE(std::filesystem::exists(directory / "trace.json.tmp"));
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace twin
