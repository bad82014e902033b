// A small recursive-descent reader of the expressions Megatron's recipes write; Megatron itself eval()s them.
#include "core/moe_layer_pattern.hpp"

#include <cctype>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace twin {

std::string moe_layer_pattern(const ModelConfig& m) {
  if (m.moe.layer_freq == 1)
    return fmt::format("([0]*{}+[1]*{})", m.moe.first_dense_layers, m.num_layers - m.moe.first_dense_layers);
  std::vector<int> pattern;
  for (int layer = 0; layer < m.num_layers; ++layer) pattern.push_back(m.is_moe_layer(layer) ? 1 : 0);
  return fmt::format("[{}]", fmt::join(pattern, ","));
}

namespace {

class PatternReader {
 public:
  explicit PatternReader(std::string_view text) : text_(text) {}

  std::vector<int> read() {
    std::vector<int> layers = sum();
    skip_spaces();
    if (at_ < text_.size()) fail("unexpected text");
    return layers;
  }

 private:
  // sum := term ('+' term)* ; term := '(' sum ')' | list ('*' count)?
  std::vector<int> sum() {
    std::vector<int> layers = term();
    while (take('+')) {
      const std::vector<int> more = term();
      layers.insert(layers.end(), more.begin(), more.end());
    }
    return layers;
  }

  std::vector<int> term() {
    if (take('(')) {
      if (++depth_ > kMaxDepth) fail("parentheses nested too deep");
      std::vector<int> inner = sum();
      if (!take(')')) fail("expected ')'");
      --depth_;
      return inner;
    }
    std::vector<int> list = bracketed();
    if (!take('*')) return list;
    const long long count = number();
    if (count > 100000 || list.size() * static_cast<std::size_t>(count) > 100000) fail("too many layers");
    std::vector<int> repeated;
    for (long long i = 0; i < count; ++i) repeated.insert(repeated.end(), list.begin(), list.end());
    return repeated;
  }

  std::vector<int> bracketed() {
    if (!take('[')) fail("expected '[' or '('");
    std::vector<int> list;
    if (take(']')) return list;
    do {
      const long long value = number();
      if (value != 0 && value != 1) fail("a layer is 0 (dense) or 1 (MoE)");
      list.push_back(static_cast<int>(value));
    } while (take(','));
    if (!take(']')) fail("expected ']'");
    return list;
  }

  long long number() {
    skip_spaces();
    const std::size_t start = at_;
    long long value = 0;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_])) && at_ - start < 9)
      value = value * 10 + (text_[at_++] - '0');
    if (at_ == start) fail("expected a number");
    return value;
  }

  bool take(char c) {
    skip_spaces();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  void skip_spaces() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }

  [[noreturn]] void fail(const char* what) const {
    throw std::invalid_argument(fmt::format("{} at character {} of \"{}\"", what, at_ + 1, text_));
  }

  static constexpr int kMaxDepth = 16;  // a hostile file's "(((..." must not exhaust the stack
  std::string_view text_;
  std::size_t at_ = 0;
  int depth_ = 0;
};

}  // namespace

MoeLayerLayout read_moe_layer_pattern(std::string_view text, int num_layers) {
  const std::vector<int> layers = PatternReader(text).read();
  if (static_cast<int>(layers.size()) != num_layers)
    throw std::invalid_argument(fmt::format("\"{}\" describes {} layers, the model has {}", text, layers.size(),
                                            num_layers));
  MoeLayerLayout layout;
  while (layout.first_dense_layers < num_layers && layers[layout.first_dense_layers] == 0) ++layout.first_dense_layers;
  for (int freq = 1; freq <= num_layers; ++freq) {
    bool matches = true;
    for (int i = layout.first_dense_layers; i < num_layers && matches; ++i) matches = layers[i] == (i % freq == 0);
    if (matches && layout.first_dense_layers < num_layers) {
      layout.layer_freq = freq;
      return layout;
    }
  }
  throw std::invalid_argument(fmt::format("\"{}\": expected dense first layers, then every n-th layer MoE (twin's "
                                          "model.moe.first_dense_layers and layer_freq)", text));
}

}  // namespace twin
