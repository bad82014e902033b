#include "calibrate/gpu/power_load_units.hpp"

#include <fmt/format.h>

#include "calibrate/gpu/gemm_bench.hpp"
#include "gpu/attention.hpp"
#include "gpu/device_buffer.hpp"

namespace twin::gpu {
namespace {

class GemmUnit final : public ComputeUnit {
 public:
  GemmUnit(const GemmShape& shape, cudaStream_t stream)
      : shape_(shape), bench_(stream), a_(2 * gemm_a_elements(shape)), b_(2 * gemm_b_elements(shape)),
        c_(2 * gemm_c_elements(shape)) {
    fill_operand(shape, a_.data(), gemm_a_elements(shape), 31, stream);
    fill_operand(shape, b_.data(), gemm_b_elements(shape), 32, stream);
  }
  void launch() override { bench_.launch(shape_, a_.data(), b_.data(), c_.data()); }
  double flops() const override { return gemm_flops(shape_); }
  std::string name() const override {
    return fmt::format("{} GEMM {}x{}x{}{}", to_string(shape_.inputs), shape_.m, shape_.n, shape_.k,
                       shape_.count > 1 ? fmt::format(" x {} groups", shape_.count) : std::string());
  }

 private:
  GemmShape shape_;
  GemmBench bench_;
  DeviceBuffer a_, b_, c_;
};

class AttentionUnit final : public ComputeUnit {
 public:
  AttentionUnit(const AttentionShape& shape, cudaStream_t stream)
      : shape_(shape), stream_(stream), attention_(AttentionImplementation::cudnn), q_(2 * q_elements()),
        k_(2 * kv_elements()), v_(2 * kv_elements()), o_(2 * q_elements()), dout_(2 * q_elements()),
        dq_(2 * q_elements()), dk_(2 * kv_elements()), dv_(2 * kv_elements()),
        lse_(4 * static_cast<std::size_t>(shape.batch * shape.heads * shape.seq_q)) {
    fill_random_bf16(q_.data(), q_elements(), 41, stream);
    fill_random_bf16(k_.data(), kv_elements(), 42, stream);
    fill_random_bf16(v_.data(), kv_elements(), 43, stream);
    fill_random_bf16(dout_.data(), q_elements(), 44, stream);
    dims_.batch = shape.batch;
    dims_.seq = shape.seq_q;
    dims_.heads = static_cast<int>(shape.heads);
    dims_.kv_heads = static_cast<int>(shape.kv_heads);
    dims_.head_dim = static_cast<int>(shape.head_dim);
    dims_.causal = shape.causal;
  }
  void launch() override {
    const auto in = [](const DeviceBuffer& b) { return static_cast<const kernels::bf16*>(b.data()); };
    const auto out = [](DeviceBuffer& b) { return static_cast<kernels::bf16*>(b.data()); };
    auto* lse = static_cast<float*>(lse_.data());
    attention_.forward(in(q_), in(k_), in(v_), out(o_), lse, dims_, stream_);
    attention_.backward(in(q_), in(k_), in(v_), in(o_), in(dout_), lse, out(dq_), out(dk_), out(dv_), dims_, stream_);
  }
  double flops() const override { return attention_flops(shape_, false) + attention_flops(shape_, true); }
  std::string name() const override {
    return fmt::format("attention forward and backward, batch {}, seq {}, {} heads over {} of {}", shape_.batch,
                       shape_.seq_q, shape_.heads, shape_.kv_heads, shape_.head_dim);
  }

 private:
  std::size_t q_elements() const {
    return static_cast<std::size_t>(shape_.batch * shape_.seq_q * shape_.heads * shape_.head_dim);
  }
  std::size_t kv_elements() const {
    return static_cast<std::size_t>(shape_.batch * shape_.seq_kv * shape_.kv_heads * shape_.head_dim);
  }
  AttentionShape shape_;
  cudaStream_t stream_;
  Attention attention_;
  kernels::AttentionDims dims_;
  DeviceBuffer q_, k_, v_, o_, dout_, dq_, dk_, dv_, lse_;
};

}  // namespace

std::unique_ptr<ComputeUnit> gemm_unit(const GemmShape& shape, cudaStream_t stream) {
  return std::make_unique<GemmUnit>(shape, stream);
}

std::unique_ptr<ComputeUnit> attention_unit(const AttentionShape& shape, cudaStream_t stream) {
  if (shape.seq_q != shape.seq_kv || shape.v_head_dim != 0 || shape.window != 0 || shape.packed)
    throw std::invalid_argument("attention load: self-attention of one head dim, no window, no packing");
  return std::make_unique<AttentionUnit>(shape, stream);
}

GemmShape expert_load_shape() { return {512, 1536, 2048, 128, false, false}; }

AttentionShape attention_load_shape() {
  AttentionShape shape;
  shape.batch = 4, shape.heads = 32, shape.kv_heads = 4, shape.seq_q = shape.seq_kv = 2048, shape.head_dim = 128;
  shape.causal = true;
  return shape;
}

}  // namespace twin::gpu
