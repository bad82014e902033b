#include "calibrate/attention_check_shapes.hpp"

#include <cstdint>

namespace twin {
namespace {

struct Layer {
  std::int64_t batch, heads, kv_heads, seq, head_dim;
  const char* origin;
};

}  // namespace

std::vector<ModelAttention> off_grid_model_attention() {
  // Heads per TP rank: query heads / TP, key-value groups / TP (at least one).
  static const Layer layers[] = {
      {1, 32, 32, 4096, 128, "llama2-7b, TP 1, seq 4096"},
      {3, 16, 4, 4096, 128, "mistral-7b, TP 2, micro-batch 3, seq 4096"},
      {1, 20, 4, 4096, 128, "qwen2.5-14b, TP 2, seq 4096"},
      {1, 8, 1, 8192, 128, "llama3-70b, TP 8, seq 8192"},
      {1, 32, 8, 16384, 128, "llama3-8b, TP 1, seq 16384"},
      {4, 24, 24, 2048, 64, "gpt3-2.7b-like (head dim 64), TP 1, micro-batch 4, seq 2048"},
  };
  std::vector<ModelAttention> out;
  for (const Layer& l : layers)
    for (const OpKind kind : {OpKind::attention_forward, OpKind::attention_backward}) {
      ModelAttention a;
      a.op.kind = kind;
      a.op.attention = AttentionShape{l.batch, l.heads, l.kv_heads, l.seq, l.seq, l.head_dim, true, true};
      a.origin = l.origin;
      out.push_back(a);
    }
  return out;
}

}  // namespace twin
