// The interpreter's tensor store: each (micro-batch, unit) slot holds the unit's activations and gradients by name
// (a layer description's tensor in one of the executor's forms, Act), each owned or an alias of another slot's,
// from CUDA's stream-ordered pool: allocated on the stream of the op that writes it, freed on the stream of its
// last user, so the pool reuses memory as Megatron's caching allocator does. Beside the slots, the buffers that
// live as long as the runtime (static_buffer).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "core/layer.hpp"

namespace twin::exec {

// A tensor in a unit's slot: one of the layer description's tensors (core/layer.hpp) in one of the forms
// the executor makes of it, so that the buffers are named by the description the lowering and the memory
// model use. The gradient of a unit's output arrives from the next unit in two parts: through its first
// norm and through the residual stream.
enum class Form : std::uint8_t {
  value,                   // as its block wrote it
  gathered,                // all-gathered over TP (a column-parallel linear's input under SP)
  reduced,                 // reduced over TP (a row-parallel linear's output)
  gradient,                // its gradient (after any TP reduction)
  gradient_partial,        // a column-parallel dgrad's partial sums, before their TP reduction
  gradient_gathered,       // its gradient all-gathered over TP (a row-parallel linear's output gradient)
  next_norm_gradient,      // the unit's output gradient through the next unit's norm
  next_residual_gradient,  // ... and through the next unit's residual stream
  fp8,                     // an FP8 linear's input cast to FP8: its copies and scaling (executor/gpu/fp8_linears.hpp)
  fp8_rowwise,             // ... its rowwise copy apart, where the forward GEMM alone reads it (Fp8Held::columnwise)
  fp8_gradient,            // an FP8 linear's output gradient cast to FP8 (the tensor's gradient form's)
  fp8_gathered,            // ... its input's FP8 copies all-gathered over TP (SP with per-tensor scales)
  fp8_gradient_gathered,   // ... its output gradient's FP8 copies all-gathered over TP
  // The QKV rows' query and key heads as the projection wrote them, before QK-norm normalised them in place (the
  // memory model's "Q and K before QK-norm"), [tokens, (heads + groups) head_dim], then the norm's fp32 1/rms per
  // head and token: what its backward reads (executor/gpu/dense_block_qk_norm.cpp).
  before_qk_norm,
  // A block's rows between its ops, of the tensor the block writes: multi-latent attention's forward rows (the kv
  // projections' outputs, from kv_down to the heads' expansion) and its backward's gradients
  // (executor/gpu/mla_block.cpp); its saved tensors are its statistics tensor's value.
  between_steps,
  gradient_between_steps,
  // The 1-byte mask a hidden dropout kept for its backward (executor/gpu/dense_block_dropout.cpp): a residual's under
  // its output's name, the embedding's under its lookup's (Tensor::embedded).
  dropout_mask,
  // Without gradient accumulation fusion: the weight's gradient (then the bias's) of the linear that writes the tensor,
  // as its GEMM wrote it, until the grad_accumulation op adds it into the gradient.
  weight_gradient_apart,
  count
};

struct Act {
  layer::Tensor tensor = layer::Tensor::count;
  Form form = Form::value;
  bool operator==(const Act&) const = default;
  int index() const { return static_cast<int>(tensor) * static_cast<int>(Form::count) + static_cast<int>(form); }
};
std::string to_string(Act act);  // "qkv", "fc2_out (gradient)"
inline constexpr int kActCount = layer::kTensorCount * static_cast<int>(Form::count);
inline constexpr Act kNoAct{};

class TensorStore {
 public:
  // `rank_class`: named in the message of a tensor that is not there.
  explicit TensorStore(int rank_class) : rank_class_(rank_class) {}
  ~TensorStore();
  TensorStore(const TensorStore&) = delete;
  TensorStore& operator=(const TensorStore&) = delete;

  void* get(int mb, int unit, Act name);  // throws std::logic_error naming the tensor when it is not there
  bool has(int mb, int unit, Act name);
  // The tensor, allocated on `stream` unless it is there (a recomputed forward writes where the first one did).
  void* make(int mb, int unit, Act name, std::size_t bytes, cudaStream_t stream);
  void alias(int mb, int unit, Act name, int from_unit, Act from);
  void release(int mb, int unit, Act name, cudaStream_t stream);
  // Frees a unit's tensors except `keep`. Aliases are dropped first so that no alias outlives its memory.
  void release_slot(int mb, int unit, cudaStream_t stream, Act keep = kNoAct);
  void move(int mb, int from_unit, Act from, int to_unit, Act to);
  // Throws when a slot outlived the iteration (a tensor nobody released).
  void check_empty() const;

  void* static_buffer(std::size_t bytes);
  std::size_t static_bytes() const { return static_bytes_; }
  // The next make() asks for more than the GPU holds (the out-of-memory fault test).
  void fail_next_allocation(bool fail) { fail_next_ = fail; }

 private:
  struct Buffer {
    void* ptr = nullptr;
    bool owned = false;
  };
  using Slot = std::array<Buffer, kActCount>;

  int rank_class_ = 0;
  std::map<std::pair<int, int>, Slot> slots_;
  std::vector<void*> static_buffers_;
  std::size_t static_bytes_ = 0;
  bool fail_next_ = false;
};

}  // namespace twin::exec
