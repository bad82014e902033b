// Reading a sequence-length histogram: inline JSON, a JSON file or a CSV file, each checked pair by pair so
// that an error points at the offending entry (JSON Pointer) or line (CSV).
#include "core/scenario_histogram.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/error_line.hpp"
#include "core/input_file.hpp"

namespace twin {
namespace {

constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;

// Appends one pair after checking it against the previous one; `fail` throws at the right place.
template <class Fail>
void append_pair(std::vector<SeqLengthCount>& out, std::int64_t length, std::int64_t count, std::int64_t max_length,
                 Fail fail) {
  if (length < 1 || length > max_length)
    fail(fmt::format("expected a length in [1, training.seq_length {}], got {}", max_length, length));
  if (!out.empty() && length <= out.back().length)
    fail(fmt::format("expected a length above the previous entry's {}, got {}", out.back().length, length));
  if (count < 0 || count > kMaxCount) fail(fmt::format("expected a count in [0, 2^40], got {}", count));
  out.push_back({length, count});
}

std::vector<SeqLengthCount> parse_pairs(const JsonReader& r, std::int64_t max_length) {
  std::vector<SeqLengthCount> out;
  for (const JsonReader& item : r.non_empty_elements()) {
    const std::vector<JsonReader> pair = item.elements();
    if (pair.size() != 2) item.fail("expected a [length, count] pair");
    const std::int64_t length = pair[0].integer(1, max_length);
    const std::int64_t count = pair[1].integer(0, kMaxCount);
    append_pair(out, length, count, max_length, [&](const std::string& message) { pair[0].fail_plain(message); });
  }
  std::int64_t total = 0;
  for (const SeqLengthCount& bar : out) total += bar.count;
  if (total <= 0) r.fail_plain("expected counts with a positive sum");
  return out;
}

std::string read_file(const std::filesystem::path& path, const JsonReader& naming) {
  try {
    return read_input_file(path, "a histogram file of sequence lengths");
  } catch (const InputError& error) {  // named where the scenario points to it
    naming.fail_plain(fmt::format("expected a readable histogram file: {}", error.what()));
  }
}

// A JSON file's [[length, count], ...] taken pair by pair as the parser meets them (SAX): the bars are all it keeps,
// where a document of millions of pairs takes about ten times the file. Errors name the file and the pair's path,
// in the words JsonReader uses for an inline histogram.
class PairsReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  PairsReader(std::string file, std::int64_t max_length, std::vector<SeqLengthCount>& out)
      : file_(std::move(file)), max_length_(max_length), out_(out) {}

  bool null() override { return wrong("null"); }
  bool boolean(bool value) override { return wrong(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override { return number(value, fmt::format("{}", value)); }
  bool number_unsigned(number_unsigned_t value) override {
    return number(value > static_cast<std::uint64_t>(kMaxCount) ? kMaxCount + 1 : static_cast<std::int64_t>(value),
                  fmt::format("{}", value));
  }
  bool number_float(number_float_t, const string_t& text) override { return wrong(text.substr(0, 40)); }
  bool string(string_t& value) override { return wrong(printable_line(nlohmann::json(value).dump(-1, ' ', false,
                                                           nlohmann::json::error_handler_t::replace).substr(0, 60))); }
  bool binary(binary_t&) override { return wrong("binary data"); }
  bool start_object(std::size_t) override { return wrong("an object"); }
  bool key(string_t&) override { return false; }  // never reached: an object is refused at its start
  bool end_object() override { return false; }
  bool start_array(std::size_t) override {
    if (depth_ == 2) return wrong("an array");
    if (depth_++ == 1) position_ = 0;
    return true;
  }
  bool end_array() override {
    if (--depth_ == 1) {
      if (position_ != 2) fail(pair_path(), "expected a [length, count] pair, got an array of " + std::to_string(position_));
      append_pair(out_, length_, count_, max_length_, [&](const std::string& message) { fail(pair_path() + "/0", message); });
      ++index_;
    } else if (index_ == 0) {
      fail("", "expected a non-empty array, got an array");
    }
    return true;
  }
  bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception& error) override {
    throw InputError(file_, "", fmt::format("malformed JSON (byte {}): {}", byte, error.what()));
  }

 private:
  std::string pair_path() const { return "/" + std::to_string(index_); }
  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw InputError(file_, path, message);
  }
  // A value where only an array (or, in a pair, an integer) may stand.
  [[noreturn]] bool wrong(const std::string& got) const {
    if (depth_ == 0) fail("", "expected [[length, count], ...], got " + got);
    if (depth_ == 1) fail(pair_path(), "expected a [length, count] pair, got " + got);
    fail(pair_path() + "/" + std::to_string(position_), "expected an integer, got " + got);
  }
  bool number(std::int64_t value, const std::string& text) {
    if (depth_ < 2) return wrong(text);
    if (position_ == 0 && (value < 1 || value > max_length_))
      fail(pair_path() + "/0", fmt::format("expected a positive integer (at most {}), got {}", max_length_, text));
    if (position_ == 1 && (value < 0 || value > kMaxCount))
      fail(pair_path() + "/1", fmt::format("expected an integer in [0, {}], got {}", kMaxCount, text));
    if (position_ >= 2) fail(pair_path(), "expected a [length, count] pair, got an array of more than 2");
    (position_++ == 0 ? length_ : count_) = value;
    return true;
  }

  std::string file_;
  std::int64_t max_length_;
  std::vector<SeqLengthCount>& out_;
  int depth_ = 0;              // 0 outside, 1 in the list, 2 in a pair
  std::size_t index_ = 0;      // the pair being read
  int position_ = 0;           // in it: 0 the length, 1 the count
  std::int64_t length_ = 0, count_ = 0;
};

}  // namespace

std::vector<SeqLengthCount> parse_seq_length_histogram_json(const std::string& text, const std::string& file,
                                                            std::int64_t max_length) {
  std::vector<SeqLengthCount> out;
  out.reserve(static_cast<std::size_t>(std::min<std::int64_t>(max_length, static_cast<std::int64_t>(text.size() / 6 + 1))));
  PairsReader reader(file, max_length, out);
  nlohmann::json::sax_parse(text, &reader);
  std::int64_t total = 0;
  for (const SeqLengthCount& bar : out) total += bar.count;
  if (total <= 0) throw InputError(file, "", "expected counts with a positive sum");
  return out;
}

namespace {

// Skips blanks as an istream's >> does.
std::size_t skip_blanks(std::string_view text, std::size_t at) {
  while (at < text.size() && text[at] != '\0' && std::strchr(" \t\v\f\r", text[at])) ++at;
  return at;
}

// An integer with an optional sign at `at` (blanks before it skipped), as >> reads one; nullopt if none or beyond
// int64.
std::optional<std::int64_t> integer_at(std::string_view text, std::size_t& at) {
  at = skip_blanks(text, at);
  std::size_t digits = at;
  if (digits < text.size() && text[digits] == '+') ++digits;  // from_chars takes '-' but not '+'
  if (digits < text.size() && text[digits] == '-' && digits != at) return std::nullopt;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data() + digits, text.data() + text.size(), value);
  if (error != std::errc()) return std::nullopt;
  at = static_cast<std::size_t>(end - text.data());
  return value;
}

// "length,count" (blanks around either number), as a CSV histogram's rows hold; nullopt if the line is not.
std::optional<SeqLengthCount> csv_row(std::string_view line) {
  std::size_t at = 0;
  const std::optional<std::int64_t> length = integer_at(line, at);
  if (!length) return std::nullopt;
  at = skip_blanks(line, at);
  if (at >= line.size() || line[at] != ',') return std::nullopt;
  const std::optional<std::int64_t> count = integer_at(line, ++at);
  if (!count || skip_blanks(line, at) != line.size()) return std::nullopt;
  return SeqLengthCount{*length, *count};
}

// The rows of `lines`, read one line at a time: the bars are all a reader keeps (at most `reserve` of them, reserved
// at once so that millions of rows cost no doubling copy).
std::vector<SeqLengthCount> parse_csv_lines(std::istream& lines, const std::string& file, std::int64_t max_length,
                                            std::size_t reserve) {
  std::vector<SeqLengthCount> out;
  out.reserve(reserve);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto fail = [&](const std::string& message) {
      throw InputError(file, "", fmt::format("line {}: {}", number, message));
    };
    if (number == 1 && line.find_first_of("0123456789") == std::string::npos) continue;  // header
    const std::optional<SeqLengthCount> row = csv_row(line);
    if (!row) fail(fmt::format("expected \"length,count\" with two integers, got \"{}\"", line));
    append_pair(out, row->length, row->count, max_length, fail);
  }
  std::int64_t total = 0;
  for (const SeqLengthCount& bar : out) total += bar.count;
  if (out.empty() || total <= 0) throw InputError(file, "", "expected (length, count) rows with a positive count sum");
  return out;
}

}  // namespace

std::vector<SeqLengthCount> parse_seq_length_histogram_csv(const std::string& text, const std::string& file,
                                                           std::int64_t max_length) {
  std::istringstream lines(text);
  return parse_csv_lines(lines, file, max_length, 0);
}

std::vector<SeqLengthCount> parse_seq_length_histogram(const JsonReader& r, const std::filesystem::path& scenario_folder,
                                                       std::int64_t max_length) {
  if (r.value().is_array()) return parse_pairs(r, max_length);
  if (!r.value().is_string()) r.fail("expected [[length, count], ...] or a .json or .csv file name");
  const std::string name = r.string();
  const std::filesystem::path path = scenario_folder / name;
  const std::string extension = path.extension().string();
  if (extension == ".csv") {  // streamed: a file of millions of rows is never held whole
    std::ifstream in;
    try {
      in = open_input_file(path, "a histogram file of sequence lengths");
    } catch (const InputError& error) {  // named where the scenario points to it
      r.fail_plain(fmt::format("expected a readable histogram file: {}", error.what()));
    }
    std::error_code unknown;
    const std::uintmax_t bytes = std::filesystem::file_size(path, unknown);
    const std::size_t most_rows = unknown ? 0 : static_cast<std::size_t>(bytes / 4 + 1);  // "1,1\n": the shortest row
    return parse_csv_lines(in, path.string(), max_length,
                           std::min(most_rows, static_cast<std::size_t>(std::max<std::int64_t>(max_length, 0))));
  }

  if (extension != ".json") r.fail("expected a file name ending in .json or .csv");
  return parse_seq_length_histogram_json(read_file(path, r), path.string(), max_length);
}

void check_hot_switch_preconditions(const Scenario& scenario, const JsonReader& hot_switch) {
  const TrainingConfig& t = scenario.training;
  if (t.seq_length_buckets.empty() && t.seq_length_histogram.empty())
    hot_switch.fail_plain("hot switching needs a sequence-length distribution: expected training.seq_length_buckets "
                          "or training.seq_length_histogram");
  if (scenario.model.is_moe())
    hot_switch.fail_plain("hot switching is implemented for dense models; expected false for a MoE model");
  if (scenario.cluster.total_gpus() > kMaxHotSwitchGpus)
    hot_switch.fail_plain(fmt::format("hot switching is simulated with one rank class per GPU; expected at most {} "
                                      "GPUs, the cluster has {}",
                                      kMaxHotSwitchGpus, scenario.cluster.total_gpus()));
}

}  // namespace twin
