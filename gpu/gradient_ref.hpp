// A weight's gradient buffer as the framework keeps it: bf16, or fp32 where the framework keeps fp32 main gradients
// (framework.main_grad_dtype float32: Megatron's main_grad under accumulate_allreduce_grads_in_fp32). The kernels
// that write or read weight gradients (gpu/kernels.hpp) take either: they sum in fp32 and round once to the buffer's
// type. Compiled by nvcc (C++17) and included by C++20 code.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>

namespace twin::kernels {

enum class GradType : std::uint8_t { bf16, f32 };

// Bytes of one gradient element of `type`.
constexpr std::size_t element_bytes(GradType type) {
  return type == GradType::f32 ? sizeof(float) : sizeof(__nv_bfloat16);
}

struct GradRef {
  void* data = nullptr;
  GradType type = GradType::bf16;
  GradRef() = default;
  GradRef(std::nullptr_t) {}
  GradRef(void* p, GradType t) : data(p), type(t) {}
  GradRef(__nv_bfloat16* p) : data(p), type(GradType::bf16) {}  // implicit: a bf16 buffer is the common case
  GradRef(float* p) : data(p), type(GradType::f32) {}
  // Kernels that only read a gradient (AdamW, the norm's sum of squares) take it from a const pointer too.
  GradRef(const __nv_bfloat16* p) : GradRef(const_cast<__nv_bfloat16*>(p)) {}
  GradRef(const float* p) : GradRef(const_cast<float*>(p)) {}
  std::size_t element_bytes() const { return kernels::element_bytes(type); }
  // Element `e` on (a view of the same buffer).
  GradRef at(std::int64_t e) const {
    GradRef out = *this;
    if (data) out.data = static_cast<char*>(data) + e * static_cast<std::int64_t>(element_bytes());
    return out;
  }
  explicit operator bool() const { return data != nullptr; }
  bool operator==(const GradRef& other) const { return data == other.data && type == other.type; }
};

}  // namespace twin::kernels
