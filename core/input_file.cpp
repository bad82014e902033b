// read_input_file checks the file's type and size before reading (and stops at the limit while reading,
// in case it grows). parse_input_json runs nlohmann's SAX parser once to find what its DOM parser accepts
// silently (duplicate keys: last wins) with the JSON path of the offence, then builds the document.
#include "core/input_file.hpp"

#include <fstream>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"

namespace twin {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What a path that is not a regular file is, for "is a FIFO, not a regular file".
std::string_view kind_of(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory: return "a folder";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::symlink: return "a symbolic link";
    case fs::file_type::none:
    case fs::file_type::not_found:
    case fs::file_type::regular:
    case fs::file_type::unknown: break;
  }
  return "of an unknown kind";
}

}  // namespace

std::ifstream open_input_file(const fs::path& path, std::string_view expected, std::uintmax_t max_bytes) {
  const std::string name = path.string();
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status))
    throw InputError(name, "", fmt::format("cannot open the file (expected {})", expected));
  if (!fs::is_regular_file(status))
    throw InputError(name, "", fmt::format("is {}, not a regular file (expected {})", kind_of(status.type()), expected));
  const std::uintmax_t size = fs::file_size(path, error);
  if (!error && size > max_bytes)
    throw InputError(name, "", fmt::format("is {} bytes, more than the limit of {} (expected {})", size, max_bytes,
                                           expected));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(name, "", fmt::format("cannot open the file (expected {})", expected));
  return in;
}

std::string read_input_file(const fs::path& path, std::string_view expected, std::uintmax_t max_bytes) {
  const std::string name = path.string();
  std::ifstream in = open_input_file(path, expected, max_bytes);
  std::string text;
  std::vector<char> block(1 << 16);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    text.append(block.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw InputError(name, "", fmt::format("is more than the limit of {} bytes (expected {})", max_bytes, expected));
  }
  if (in.bad()) throw InputError(name, "", fmt::format("cannot be read (expected {})", expected));
  return text;
}

namespace {

constexpr std::size_t kMaxDepth = 256;
constexpr std::size_t kMaxShownKey = 60;

std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key.substr(0, kMaxShownKey)) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  if (key.size() > kMaxShownKey) out += "...";
  return out;
}

// Walks the SAX events keeping the JSON path, and stops at the first duplicate key or excess nesting.
class StructureCheck : public nlohmann::json_sax<json> {
 public:
  std::string problem, problem_path;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& name) override {
    Level& level = levels_.back();
    level.current = pointer_token(name);
    if (!level.keys.insert(name).second) {
      problem = fmt::format("expected each key once in an object, got '{}' twice", level.current);
      problem_path = path();
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string& token, const nlohmann::detail::exception& error) override {
    if (error.id == 406) {  // a number beyond a double ("1e400"): name where it is
      problem = fmt::format("expected a number within the range of a double, got {}", token.substr(0, 40));
      problem_path = path();
    }
    return false;
  }

 private:
  struct Level {
    bool object;
    std::set<std::string> keys;
    std::string current;   // the key being read (objects)
    std::size_t index = 0;  // the element being read (arrays)
  };
  std::vector<Level> levels_;

  std::string path() const {
    std::string out;
    for (const Level& level : levels_) out += "/" + (level.object ? level.current : std::to_string(level.index));
    return out;
  }
  bool value() {
    if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
    return true;
  }
  bool open(bool object) {
    if (levels_.size() >= kMaxDepth) {
      problem = fmt::format("nesting deeper than {} levels", kMaxDepth);
      problem_path = path();
      return false;
    }
    levels_.push_back({object, {}, "", 0});
    return true;
  }
  bool close() {
    levels_.pop_back();
    return value();
  }
};

}  // namespace

json parse_input_json(std::string_view text, const std::string& file) {
  StructureCheck check;
  try {
    json::sax_parse(text, &check);
  } catch (const json::exception&) {
    // The DOM parse below reports it with its position.
  }
  if (!check.problem.empty()) throw InputError(file, check.problem_path, check.problem);
  try {
    return json::parse(text);
  } catch (const json::parse_error& error) {
    // nlohmann's message carries the line and column; the byte offset locates it in any editor too.
    throw InputError(file, "", fmt::format("malformed JSON (byte {}): {}", error.byte, error.what()));
  } catch (const json::exception& error) {
    throw InputError(file, "", fmt::format("malformed JSON: {}", error.what()));
  }
}

}  // namespace twin
