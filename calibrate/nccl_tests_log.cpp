// Lines are told apart by their first token: '#' lines are headers (run start, Rank lines, the column
// header), lines whose first token is all digits are result rows, and anything else (NCCL_DEBUG output,
// warnings) is skipped. Columns are found by name in the header, so that -I (per-iteration columns) and
// timestamps, and older logs without "root", read alike.
#include "calibrate/nccl_tests_log.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "calibrate/model_fit.hpp"
#include "core/error.hpp"

namespace twin {
namespace {

struct Name {
  const char* nccl_tests;  // the binary's collective ("all_reduce" of all_reduce_perf)
  OpKind kind;
};
const Name kNames[] = {{"all_reduce", OpKind::all_reduce},         {"all_gather", OpKind::all_gather},
                       {"reduce_scatter", OpKind::reduce_scatter}, {"alltoall", OpKind::all_to_all},
                       {"sendrecv", OpKind::send}};

std::string nccl_name(OpKind kind) {
  for (const Name& n : kNames)
    if (n.kind == kind) return n.nccl_tests;
  return to_string(kind);
}

std::vector<std::string> tokens_of(std::string_view line) {
  std::vector<std::string> tokens;
  std::istringstream in{std::string(line)};
  for (std::string token; in >> token;) tokens.push_back(token);
  return tokens;
}

bool all_digits(const std::string& token) {
  return !token.empty() && std::all_of(token.begin(), token.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The out-of-place columns of the header, by position among the tokens after '#'.
struct Columns {
  bool seen = false;
  std::size_t size = 0, time = 0, algbw = 0, busbw = 0;
  std::optional<std::size_t> wrong;  // "#wrong" (count of wrong elements); older logs: "error" (not checked)
  std::size_t needed() const { return std::max({size, time, algbw, busbw, wrong.value_or(0)}) + 1; }
};

// The file name's collective: one of the names (with or without '_' or '-'), and only one.
std::optional<OpKind> collective_of_file_name(const std::string& file) {
  std::string stem;
  for (unsigned char c : std::filesystem::path(file).filename().string())
    if (std::isalnum(c)) stem += static_cast<char>(std::tolower(c));
  std::optional<OpKind> found;
  for (const Name& n : kNames) {
    std::string wanted;
    for (const char* c = n.nccl_tests; *c; ++c)
      if (*c != '_') wanted += *c;
    if (stem.find(wanted) == std::string::npos) continue;
    if (found) return std::nullopt;  // two names: no guess
    found = n.kind;
  }
  return found;
}

class Parser {
 public:
  Parser(const std::string& file, std::optional<OpKind> collective) : file_(file), given_(collective) {
    run_.file = file_;
  }

  void line(int number, std::string_view text) {
    number_ = number;
    const std::vector<std::string> tokens = tokens_of(text);
    if (tokens.empty()) return;
    if (tokens[0][0] == '#') return header(text, tokens);
    if (all_digits(tokens[0])) row(tokens);
  }

  std::vector<NcclTestsRun> finish() {
    close_run();
    if (runs_.empty()) fail(0, "no nccl-tests results: expected its column header (# size count type ...) and rows");
    return std::move(runs_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& message) const {
    throw InputError(file_, "", line > 0 ? fmt::format("line {}: {}", line, message) : message);
  }

  bool run_started() const { return columns_.seen || !run_.rows.empty(); }

  void header(std::string_view text, std::vector<std::string> tokens) {
    tokens[0].erase(0, 1);  // "#" alone, or glued to the first word
    if (tokens[0].empty()) tokens.erase(tokens.begin());
    if (tokens.empty()) return;
    const std::string rest(text.substr(text.find('#') + 1));
    if (rest.find("Collective test starting:") != std::string::npos) {
      start_run_if_needed();
      run_.test = tokens.back();
      run_.test_line = number_;
    } else if (tokens[0] == "nThread") {
      start_run_if_needed();
    } else if (tokens[0] == "Rank") {
      rank_line(tokens);
    } else if (tokens.size() >= 2 && tokens[0] == "size" && tokens[1] == "count") {
      column_header(tokens);
    }
  }

  void start_run_if_needed() {
    if (run_started()) close_run();
    if (run_.first_line == 0) run_.first_line = number_;
  }

  // "Rank 3 Group 0 Pid 1234 on host device 3 [0000:18:00] NVIDIA H100 80GB HBM3"
  void rank_line(const std::vector<std::string>& tokens) {
    NcclTestsRank rank;
    rank.line = number_;
    auto on = std::find(tokens.begin(), tokens.end(), "on");
    auto device = std::find(tokens.begin(), tokens.end(), "device");
    int value = -1;
    const bool number_ok = tokens.size() > 1 && all_digits(tokens[1]) &&
                           std::from_chars(tokens[1].data(), tokens[1].data() + tokens[1].size(), value).ec == std::errc();
    if (!number_ok || on == tokens.end() || on + 1 >= device || device == tokens.end() || device + 2 >= tokens.end())
      fail(number_, "expected a device line \"#  Rank N Group G Pid P on HOST device D [BUS] NAME\"");
    rank.rank = value;
    rank.host = *(on + 1);
    auto name = device + 2;  // after the device number
    if (!name->empty() && name->front() == '[') {
      while (name != tokens.end() && name->back() != ']') ++name;  // "[0x07]" or "[0000:18:00]"
      if (name != tokens.end()) ++name;
    }
    for (; name != tokens.end(); ++name) rank.device += (rank.device.empty() ? "" : " ") + *name;
    if (rank.device.empty()) fail(number_, "expected the device's name at the end of the Rank line");
    if (rank.rank != static_cast<int>(run_.ranks.size()))
      fail(number_, fmt::format("expected Rank {} (Rank lines in order from 0), got Rank {}", run_.ranks.size(), rank.rank));
    run_.ranks.push_back(std::move(rank));
  }

  void column_header(const std::vector<std::string>& tokens) {
    if (columns_.seen) close_run();  // a new run without its own start lines
    Columns c;
    c.seen = true;
    auto first = [&](const char* name) { return std::find(tokens.begin(), tokens.end(), name); };
    auto time = std::find_if(tokens.begin(), tokens.end(), [](const std::string& t) { return t == "time" || t == "cputime"; });
    if (time != tokens.end() && *time == "cputime")
      fail(number_, "expected GPU time columns: this log reports host time (nccl-tests -C 1); run it without -C");
    auto algbw = first("algbw"), busbw = first("busbw");
    if (time == tokens.end() || algbw == tokens.end() || busbw == tokens.end() || !(time < algbw && algbw < busbw))
      fail(number_, "expected the column header \"# size count type redop root time algbw busbw #wrong ...\"");
    c.size = 0;
    c.time = time - tokens.begin();
    c.algbw = algbw - tokens.begin();
    c.busbw = busbw - tokens.begin();
    if (busbw + 1 != tokens.end() && *(busbw + 1) == "#wrong") c.wrong = c.busbw + 1;
    columns_ = c;
  }

  double number(const std::string& token, const char* column) const {
    char* end = nullptr;
    const double value = std::strtod(token.c_str(), &end);
    if (token.empty() || end != token.c_str() + token.size() || !std::isfinite(value) || value < 0)
      fail(number_, fmt::format("expected a number >= 0 in column {}, got \"{}\"", column, token));
    return value;
  }

  void row(const std::vector<std::string>& tokens) {
    if (!columns_.seen) fail(number_, "a result row before nccl-tests' column header (# size count type ...)");
    if (tokens.size() < columns_.needed())
      fail(number_, fmt::format("expected a result row of at least {} columns, got {}", columns_.needed(), tokens.size()));
    NcclTestsRow r;
    r.line = number_;
    Bytes size = 0;
    const std::string& size_token = tokens[columns_.size];
    if (std::from_chars(size_token.data(), size_token.data() + size_token.size(), size).ec != std::errc())
      fail(number_, fmt::format("expected a size in bytes, got \"{}\"", size_token));
    r.size_bytes = size;
    r.time_us = number(tokens[columns_.time], "time (us)");
    r.algbw_GBps = number(tokens[columns_.algbw], "algbw (GB/s)");
    r.busbw_GBps = number(tokens[columns_.busbw], "busbw (GB/s)");
    if (columns_.wrong && tokens[*columns_.wrong] != "N/A" && number(tokens[*columns_.wrong], "#wrong") > 0)
      fail(number_, fmt::format("#wrong {}: the collective returned wrong results, so its times teach nothing",
                                tokens[*columns_.wrong]));
    if (r.size_bytes == 0) return;  // -b 0: no bytes, no bandwidth
    if (!(r.time_us > 0)) fail(number_, "expected a time above 0 us");
    if (!run_.rows.empty() && r.size_bytes <= run_.rows.back().size_bytes)
      fail(number_, fmt::format("expected a size above the previous row's {} B (rows ascend: one datatype and one "
                                "reduction per run, not nccl-tests -d all or -o all)",
                                run_.rows.back().size_bytes));
    run_.rows.push_back(r);
  }

  OpKind collective_of(const NcclTestsRun& run) const {
    std::optional<OpKind> from_log;
    if (!run.test.empty()) {
      from_log = nccl_tests_collective(run.test);
      if (!from_log)
        fail(run.test_line, fmt::format("{}: twin keeps tables of {} only", run.test, nccl_tests_collective_names()));
    }
    if (given_) {
      if (from_log && *from_log != *given_)
        fail(run.test_line, fmt::format("the log ran {}, and --collective says {}", run.test, nccl_name(*given_)));
      return *given_;
    }
    if (from_log) return *from_log;
    if (auto named = collective_of_file_name(file_)) return *named;
    fail(run.first_line, fmt::format("cannot tell which collective ran: the log has no \"# Collective test starting\" "
                                     "line and its file name names none; give --collective ({})",
                                     nccl_tests_collective_names()));
  }

  // busbw / algbw is nccl-tests' factor of the collective and rank count: a row that disagrees was not
  // produced by that collective over that many ranks. Printed with two decimals: checked from 1 GB/s.
  void check_factor(const NcclTestsRun& run) const {
    const int n = static_cast<int>(run.ranks.size());
    const double factor = busbw_factor(run.collective, n);
    for (const NcclTestsRow& r : run.rows) {
      if (r.algbw_GBps < 1.0) continue;
      if (std::abs(r.busbw_GBps - r.algbw_GBps * factor) > 0.01 * r.busbw_GBps + 0.02)
        fail(r.line, fmt::format("busbw {} / algbw {} is not {}'s factor {:.4g} over {} ranks ({}): is the collective "
                                 "or the log right?",
                                 r.busbw_GBps, r.algbw_GBps, nccl_name(run.collective), factor, n,
                                 run.collective_from));
    }
  }

  void close_run() {
    if (!run_started()) return;
    NcclTestsRun run = std::move(run_);
    run_ = NcclTestsRun{};
    run_.file = file_;
    columns_ = Columns{};
    if (run.ranks.size() < 2)
      fail(run.first_line, fmt::format("expected at least 2 \"#  Rank\" lines (the GPUs of the run, under \"# Using "
                                       "devices\"), found {}: a collective table needs a group of 2 or more",
                                       run.ranks.size()));
    if (run.rows.size() < 2)
      fail(run.first_line, fmt::format("expected at least 2 result rows of nonzero size, found {}", run.rows.size()));
    run.collective = collective_of(run);
    run.collective_from = given_ ? "--collective" : !run.test.empty() ? "the log" : "the file name";
    check_factor(run);
    runs_.push_back(std::move(run));
  }

  std::string file_;
  std::optional<OpKind> given_;
  int number_ = 0;
  Columns columns_;
  NcclTestsRun run_;
  std::vector<NcclTestsRun> runs_;
};

}  // namespace

std::optional<OpKind> nccl_tests_collective(std::string_view name) {
  std::string base(name);
  if (base.size() > 5 && base.ends_with("_perf")) base.resize(base.size() - 5);
  for (const Name& n : kNames)
    if (base == n.nccl_tests) return n.kind;
  if (base == "all_to_all") return OpKind::all_to_all;
  if (base == "send") return OpKind::send;
  return std::nullopt;
}

std::string nccl_tests_collective_names() {
  std::string names;
  for (const Name& n : kNames) names += fmt::format("{}{}", names.empty() ? "" : ", ", n.nccl_tests);
  return names;
}

std::vector<NcclTestsRun> parse_nccl_tests_log(std::string_view text, const std::string& file,
                                               std::optional<OpKind> collective) {
  Parser parser(file, collective);
  int number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    parser.line(++number, line);
    start = end + 1;
  }
  return parser.finish();
}

}  // namespace twin
