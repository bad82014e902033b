// The optimizer's kernels (gpu/kernels/optimizer.cu, parameters.cu) against float64 CPU references: the
// gradient norm at every alignment, AdamW with fp32 and bf16 state and with the master as parameter remainders,
// storing and adding fp32 gradients into bf16 buffers.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "gpu/kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using B = k::bf16;

// One AdamW step in float64 over the host copies, the gradient times `clip`.
void reference_adamw_step(std::vector<double>& hm, std::vector<double>& hv, std::vector<double>& hp,
                          const std::vector<double>& hg, const k::AdamWParams& p, double clip = 1.0) {
  for (std::size_t i = 0; i < hp.size(); ++i) {
    const double g = hg[i] * clip;
    hm[i] = p.beta1 * hm[i] + (1 - p.beta1) * g;
    hv[i] = p.beta2 * hv[i] + (1 - p.beta2) * g * g;
    const double mh = hm[i] / (1 - std::pow(double(p.beta1), p.step));
    const double vh = hv[i] / (1 - std::pow(double(p.beta2), p.step));
    hp[i] = hp[i] * (1 - double(p.lr) * p.weight_decay) - p.lr * mh / (std::sqrt(vh) + p.eps);
  }
}

TEST(KernelOptimizer, AdamWTwoStepsWithClipScaleAndGradNorm) {
  REQUIRE_GPU();
  // An odd count takes the scalar kernel, a multiple of 4 (aligned) the vectorized one.
  for (const std::int64_t n : {std::int64_t{100003}, std::int64_t{100000}}) {
  SCOPED_TRACE(n);
  auto master = random_f32(n), m = random_f32(n), v = random_f32(n), grad = random_bf16(n), param = poisoned(n * 2);
  auto partials = poisoned(k::grad_norm_partial_count() * 4), sum_sq = upload(std::vector<float>{0.5f});
  auto scale = poisoned(4);
  auto hm = f32_to_host(m.data(), n), hv = f32_to_host(v.data(), n), hp = f32_to_host(master.data(), n);
  for (auto& x : hv) x = std::abs(x);  // second moments are non-negative
  std::vector<float> vf(hv.begin(), hv.end());
  TWIN_CUDA_CHECK(cudaMemcpy(v.data(), vf.data(), n * 4, cudaMemcpyHostToDevice));
  const auto hg = bf16_to_host(grad.data(), n);
  k::grad_sum_squares(bf(grad), n, f32(partials), f32(sum_sq), nullptr);
  const float max_norm = 10.f;
  k::grad_clip_scale(f32(sum_sq), max_norm, f32(scale), nullptr);
  double ss = 0.5;
  for (double g : hg) ss += g * g;
  EXPECT_LT(report("grad_sum_squares (+=)", relative_error(f32_to_host(sum_sq.data(), 1), {ss})), 1e-5);
  const double clip = std::min(1.0, max_norm / (std::sqrt(ss) + 1e-6));
  EXPECT_LT(clip, 1.0);  // the test exercises clipping
  EXPECT_LT(report("grad_clip_scale", relative_error(f32_to_host(scale.data(), 1), {clip})), 1e-6);
  k::AdamWParams p;
  p.lr = 1e-2f;
  for (int step = 1; step <= 2; ++step) {
    p.step = step;
    k::adamw_step(f32(master), f32(m), f32(v), bf(grad), bf(param), n, p, f32(scale), nullptr);
    reference_adamw_step(hm, hv, hp, hg, p, clip);
  }
  EXPECT_LT(report("adamw master", relative_error(f32_to_host(master.data(), n), hp)), 1e-5);
  EXPECT_LT(report("adamw m", relative_error(f32_to_host(m.data(), n), hm)), 1e-5);
  EXPECT_LT(report("adamw v", relative_error(f32_to_host(v.data(), n), hv)), 1e-5);
  EXPECT_LT(report("adamw bf16 param", relative_error(bf16_to_host(param.data(), n), hp)), kBf16Tolerance);
  }
}

// The gradient-norm pass reads 16 bytes at a time over the aligned body: every start and length, the
// unaligned head and the tail included, sums to the float64 reference.
TEST(KernelOptimizer, GradSumSquaresAtEveryAlignment) {
  REQUIRE_GPU();
  const std::int64_t n = 100019;
  auto grad = random_bf16(n);
  const auto hg = bf16_to_host(grad.data(), n);
  auto partials = poisoned(k::grad_norm_partial_count() * 4);
  for (std::int64_t offset = 0; offset < 8; ++offset)
    for (std::int64_t count : {std::int64_t{1}, std::int64_t{7}, std::int64_t{8}, std::int64_t{9}, n - 8}) {
      auto sum = upload(std::vector<float>{0.f});
      k::grad_sum_squares(bf(grad) + offset, count, f32(partials), f32(sum), nullptr);
      double reference = 0;
      for (std::int64_t i = offset; i < offset + count; ++i) reference += hg[i] * hg[i];
      EXPECT_LT(relative_error(f32_to_host(sum.data(), 1), {reference}), 1e-5) << "offset " << offset << " count " << count;
    }
}

// Round to the nearest bf16 as the kernels store a bf16 state (cuda_bf16.h's conversion runs on the host too).
double round_to_bf16(double x) { return __bfloat162float(__float2bfloat16(static_cast<float>(x))); }

// training.optimizer_precision's variants: moments stored in bf16, and bf16 parameters without a master copy,
// against a float64 reference that rounds what each variant stores to bf16 after every step.
TEST(KernelOptimizer, AdamWWithBf16StateMatchesARoundingFloat64Reference) {
  REQUIRE_GPU();
  using k::StateType;
  for (const std::int64_t n : {std::int64_t{100003}, std::int64_t{100000}})
    for (const bool keep_master : {true, false})
      for (const StateType m_type : {StateType::f32, StateType::bf16})
        for (const StateType v_type : {StateType::f32, StateType::bf16}) {
          if (keep_master && m_type == StateType::f32 && v_type == StateType::f32) continue;  // the test above
          SCOPED_TRACE(testing::Message() << "n " << n << " master " << keep_master << " m bf16 "
                                          << (m_type == StateType::bf16) << " v bf16 " << (v_type == StateType::bf16));
          auto param = random_bf16(n), grad = random_bf16(n);
          const auto hg = bf16_to_host(grad.data(), n);
          std::vector<double> hp = bf16_to_host(param.data(), n), hm(n, 0.0), hv(n, 0.0);
          const std::vector<double> start = hp;
          auto master = upload(std::vector<float>(hp.begin(), hp.end()));
          const auto zeros = [&](StateType t) {
            const std::size_t bytes = n * (t == StateType::bf16 ? 2 : 4);
            gpu::DeviceBuffer b(bytes);
            TWIN_CUDA_CHECK(cudaMemset(b.data(), 0, bytes));
            return b;
          };
          auto m = zeros(m_type), v = zeros(v_type);
          const k::AdamWState state{keep_master ? f32(master) : nullptr, m.data(), m_type, v.data(), v_type};
          k::AdamWParams p;
          p.lr = 1e-2f;
          for (int step = 1; step <= 3; ++step) {
            p.step = step;
            k::adamw_step(state, bf(grad), bf(param), n, p, nullptr, nullptr);
            reference_adamw_step(hm, hv, hp, hg, p);
            for (std::int64_t i = 0; i < n; ++i) {
              if (m_type == StateType::bf16) hm[i] = round_to_bf16(hm[i]);
              if (v_type == StateType::bf16) hv[i] = round_to_bf16(hv[i]);
              if (!keep_master) hp[i] = round_to_bf16(hp[i]);
            }
          }
          const auto got_m = m_type == StateType::bf16 ? bf16_to_host(m.data(), n) : f32_to_host(m.data(), n);
          const auto got_v = v_type == StateType::bf16 ? bf16_to_host(v.data(), n) : f32_to_host(v.data(), n);
          EXPECT_LT(report("adamw m (bf16 state)", relative_error(got_m, hm)),
                    m_type == StateType::bf16 ? kBf16Tolerance : kF32Tolerance);
          EXPECT_LT(report("adamw v (bf16 state)", relative_error(got_v, hv)),
                    v_type == StateType::bf16 ? kBf16Tolerance : kF32Tolerance);
          // The update itself, not the parameters (which an update of 1e-2 hardly moves): p - p0.
          const auto got_p = bf16_to_host(param.data(), n);
          std::vector<double> got_update(n), ref_update(n);
          for (std::int64_t i = 0; i < n; ++i) got_update[i] = got_p[i] - start[i], ref_update[i] = hp[i] - start[i];
          EXPECT_LT(report("adamw update (bf16 state)", relative_error(got_update, ref_update)), 0.05);
          if (!keep_master) {  // the kernel rounds as the reference does: nearly every parameter is the same bf16
            std::int64_t differ = 0;
            for (std::int64_t i = 0; i < n; ++i) differ += got_p[i] != hp[i];
            EXPECT_LT(differ, n / 100);
          }
        }
}

template <typename T>
std::vector<T> raw_to_host(const void* device, std::int64_t count) {
  std::vector<T> host(static_cast<std::size_t>(count));
  TWIN_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Transformer Engine's pair (AdamWState::remainders), on the host: the master's bits from the parameter's and the
// remainder, and the parameter's bits from the master's (its high half, rounded up where the low half's top bit is set).
float joined_master(std::uint16_t param_bits, std::int16_t remainder) {
  const std::uint32_t high = (param_bits - (remainder < 0 ? 1u : 0u)) & 0xffffu;
  const std::uint32_t bits = (high << 16) | static_cast<std::uint16_t>(remainder);
  float master;
  std::memcpy(&master, &bits, sizeof master);
  return master;
}
std::uint16_t rounded_parameter_bits(float master) {
  std::uint32_t bits;
  std::memcpy(&bits, &master, sizeof bits);
  return static_cast<std::uint16_t>(((bits >> 16) + ((bits & 0x8000u) ? 1u : 0u)) & 0xffffu);
}

// training.store_param_remainders: three steps with the master as the bf16 parameters and their remainders against the
// same steps on fp32 master weights and a float64 reference. The pair holds the fp32 master (the update's math is the
// same), each parameter is its master rounded half away from zero, and the parameters differ from the fp32 path's
// (rounded to nearest even) only where a master lies exactly half-way.
TEST(KernelOptimizer, AdamWWithParameterRemaindersHoldsTheFp32Master) {
  REQUIRE_GPU();
  for (const std::int64_t n : {std::int64_t{100003}, std::int64_t{100000}}) {
    SCOPED_TRACE(n);
    auto param = random_bf16(n), grad = random_bf16(n);
    auto fp32_param = poisoned(n * 2);
    TWIN_CUDA_CHECK(cudaMemcpy(fp32_param.data(), param.data(), n * 2, cudaMemcpyDeviceToDevice));
    std::vector<double> hp = bf16_to_host(param.data(), n), hm(n, 0.0), hv(n, 0.0);
    const auto hg = bf16_to_host(grad.data(), n);
    auto master = upload(std::vector<float>(hp.begin(), hp.end()));
    const auto zeros = [&](std::size_t bytes) {
      gpu::DeviceBuffer b(bytes);
      TWIN_CUDA_CHECK(cudaMemset(b.data(), 0, bytes));
      return b;
    };
    auto remainders = zeros(n * 2), m = zeros(n * 4), v = zeros(n * 4), fp32_m = zeros(n * 4), fp32_v = zeros(n * 4);
    k::AdamWState paired{nullptr, m.data(), k::StateType::f32, v.data(), k::StateType::f32};
    paired.remainders = static_cast<std::int16_t*>(remainders.data());
    const k::AdamWState fp32{f32(master), fp32_m.data(), k::StateType::f32, fp32_v.data(), k::StateType::f32};
    k::AdamWParams p;
    p.lr = 1e-2f;
    for (int step = 1; step <= 3; ++step) {
      p.step = step;
      k::adamw_step(paired, bf(grad), bf(param), n, p, nullptr, nullptr);
      k::adamw_step(fp32, bf(grad), bf(fp32_param), n, p, nullptr, nullptr);
      reference_adamw_step(hm, hv, hp, hg, p);
    }
    const auto bits = raw_to_host<std::uint16_t>(param.data(), n);
    const auto rem = raw_to_host<std::int16_t>(remainders.data(), n);
    const auto fp32_master = f32_to_host(master.data(), n);
    const auto fp32_bits = raw_to_host<std::uint16_t>(fp32_param.data(), n);
    std::vector<double> joined(n);
    std::int64_t unrounded = 0, off_fp32_path = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      joined[i] = joined_master(bits[i], rem[i]);
      unrounded += bits[i] != rounded_parameter_bits(static_cast<float>(joined[i]));
      off_fp32_path += bits[i] != fp32_bits[i];
    }
    EXPECT_LT(report("adamw master as remainders vs float64", relative_error(joined, hp)), 1e-5);
    EXPECT_LT(report("adamw master as remainders vs fp32 master", relative_error(joined, fp32_master)), 1e-6);
    EXPECT_LT(report("adamw m (remainders)", relative_error(f32_to_host(m.data(), n), hm)), 1e-5);
    EXPECT_EQ(unrounded, 0);
    EXPECT_LE(off_fp32_path, n / 1000) << "parameters other than the fp32 path's";
    std::printf("[adamw remainders] n %lld: %lld of the parameters differ from the fp32 path's (ties)\n",
                static_cast<long long>(n), static_cast<long long>(off_fp32_path));
  }
}

}  // namespace
}  // namespace twin::test
