// Splitting follows POSIX shell word splitting for the parts a command line of literal words uses (quotes,
// backslash, line continuation, comments); anything that asks the shell to compute a value is refused.
#include "core/megatron_command_line.hpp"

#include <cctype>

#include <fmt/format.h>

#include "core/error.hpp"

namespace twin {
namespace {

struct Word {
  std::string text;
  int line = 1;
};

class WordSplitter {
 public:
  WordSplitter(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  std::vector<Word> words() {
    std::vector<Word> out;
    while (skip_blanks_and_comments()) out.push_back(word());
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(source_, "", fmt::format("line {}: {}", line_, what));
  }

  // Skips blanks, newlines, continuations and comments; false at the end of the text.
  bool skip_blanks_and_comments() {
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == '\n') ++line_;
      if (const std::size_t length = continuation_at(i_)) {
        ++line_;
        i_ += length;
        continue;
      }
      if (c == '#') {
        while (i_ < text_.size() && text_[i_] != '\n') ++i_;
        continue;
      }
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return true;
      ++i_;
    }
    return false;
  }

  Word word() {
    Word w{"", line_};
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') break;
      if (c == '$' || c == '`')
        fail(
            fmt::format("expected literal words, got the shell expansion '{}' (twin cannot know its value: write "
                        "the value itself)",
                        expansion_at(i_)));
      if (c == '\'') {
        quoted('\'', w.text);
      } else if (c == '"') {
        quoted('"', w.text);
      } else if (c == '\\') {
        if (i_ + 1 >= text_.size()) fail("expected a character after '\\', got the end of the text");
        if (const std::size_t length = continuation_at(i_)) {  // inside a word, it joins the word's two halves
          ++line_;
          i_ += length;
          continue;
        }
        w.text += text_[i_ + 1];
        i_ += 2;
      } else {
        w.text += c;
        ++i_;
      }
    }
    return w;
  }

  // 'text' is literal; "text" keeps \" \\ \$ \` as escapes and refuses expansions.
  void quoted(char quote, std::string& out) {
    const int opened = line_;
    for (++i_; i_ < text_.size(); ++i_) {
      const char c = text_[i_];
      if (c == quote) {
        ++i_;
        return;
      }
      if (c == '\n') ++line_;
      if (quote == '"' && (c == '$' || c == '`'))
        fail(fmt::format("expected literal words, got the shell expansion '{}' inside quotes", expansion_at(i_)));
      if (quote == '"' && c == '\\' && i_ + 1 < text_.size() &&
          std::string_view("\"\\$`").find(text_[i_ + 1]) != std::string_view::npos)
        ++i_;
      out += text_[i_];
    }
    line_ = opened;
    fail(fmt::format("expected a closing {} for the quote opened here, got the end of the text", quote));
  }

  // The length of a backslash ending a line at `at` (a script saved with CRLF ends its lines in \r\n), else 0.
  std::size_t continuation_at(std::size_t at) const {
    if (text_[at] != '\\') return 0;
    if (at + 1 < text_.size() && text_[at + 1] == '\n') return 2;
    if (at + 2 < text_.size() && text_[at + 1] == '\r' && text_[at + 2] == '\n') return 3;
    return 0;
  }

  std::string expansion_at(std::size_t at) const {
    std::size_t end = at + 1;
    while (end < text_.size() && end - at < 40 && !std::isspace(static_cast<unsigned char>(text_[end]))) ++end;
    return text_.substr(at, end - at);
  }

  const std::string& text_;
  const std::string& source_;
  std::size_t i_ = 0;
  int line_ = 1;
};

bool is_assignment(const std::string& word) {
  const std::size_t equals = word.find('=');
  if (equals == 0 || equals == std::string::npos) return false;
  if (std::isdigit(static_cast<unsigned char>(word[0]))) return false;
  for (std::size_t i = 0; i < equals; ++i)
    if (!std::isalnum(static_cast<unsigned char>(word[i])) && word[i] != '_') return false;
  return true;
}

bool is_flag(const std::string& word) { return word.size() > 2 && word.compare(0, 2, "--") == 0; }

bool is_script(const std::string& word) { return word.size() > 3 && word.compare(word.size() - 3, 3, ".py") == 0; }

// Where the arguments start: after the first *.py word, or after the leading assignments when there is none.
std::size_t first_argument(const std::vector<Word>& words) {
  for (std::size_t i = 0; i < words.size(); ++i)
    if (is_script(words[i].text)) return i + 1;
  std::size_t i = 0;
  while (i < words.size() && is_assignment(words[i].text)) ++i;
  return i;
}

}  // namespace

MegatronCommandLine parse_megatron_command_line(const std::string& text, const std::string& source) {
  const std::vector<Word> words = WordSplitter(text, source).words();
  const std::size_t start = first_argument(words);
  MegatronCommandLine out;
  for (std::size_t i = 0; i < start; ++i) {
    const bool before_command = out.launcher.empty() && is_assignment(words[i].text);
    (before_command ? out.environment : out.launcher).push_back(words[i].text);
  }
  for (std::size_t i = start; i < words.size(); ++i) {
    const Word& word = words[i];
    if (!is_flag(word.text))
      throw InputError(source, "",
                       fmt::format("line {}: expected a Megatron argument (--name) or a command running a *.py "
                                   "script, got \"{}\"",
                                   word.line, word.text));
    MegatronArgument argument;
    const std::size_t equals = word.text.find('=');
    argument.flag = word.text.substr(0, equals);
    if (equals != std::string::npos) argument.values.push_back(word.text.substr(equals + 1));
    const MegatronFlag* known = find_megatron_flag(argument.flag);
    const bool takes_values = !known || known->kind != MegatronFlagKind::switch_on;
    while (equals == std::string::npos && i + 1 < words.size() && !is_flag(words[i + 1].text)) {
      if (!takes_values)  // a switch followed by a word: refused here, naming the switch, not at the word
        throw InputError(source, "",
                         fmt::format("line {}: {}: expected no value (it is a switch), got \"{}\"", words[i + 1].line,
                                     argument.flag, words[i + 1].text));
      argument.values.push_back(words[++i].text);
    }
    if (auto error = megatron_value_error(argument))
      throw InputError(source, "", fmt::format("line {}: {}: {}", word.line, argument.flag, *error));
    out.arguments.push_back(std::move(argument));
    out.argument_lines.push_back(word.line);
  }
  return out;
}

}  // namespace twin
