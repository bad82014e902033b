// Delayed FP8 scaling (gpu/fp8_cast.hpp) against a host reference of Transformer Engine's rule, cast by cast: the
// scale of cast t is fp8_max / max(amax of casts t-1 .. t-L), the scale before where that is 0 or not finite (1 at
// first); each cast records its own amax on the GPU. Checked per cast: the inverse scale the GEMMs read, the amax in
// the history, every byte of both copies, and the dequantized tensor against the float64 one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu/op_kernels.hpp"
#include "tests/gpu/fp8_test_util.hpp"

namespace twin::test {
namespace {

using kernels::Fp8Type;

// Transformer Engine's amax_and_scale_update with "max" and margin 0, on the host, one cast at a time.
struct HostDelayedScale {
  int history_len;
  std::deque<float> amaxes;  // newest first
  float scale = 1.0f;
  float next_scale() {
    float history = 0.0f;
    for (float a : amaxes) history = std::max(history, a);
    if (history > 0.0f && std::isfinite(history)) scale = kernels::fp8_max(type) / history;
    return scale;
  }
  void record(float amax) {
    amaxes.push_front(amax);
    if (static_cast<int>(amaxes.size()) > history_len) amaxes.pop_back();
  }
  Fp8Type type;
};

struct DelayedCast {
  std::int64_t rows, cols;
  Fp8Type type;
  int history_len;
  gpu::DeviceBuffer rowwise{static_cast<std::size_t>(rows * cols)}, columnwise{static_cast<std::size_t>(rows * cols)};
  gpu::DeviceBuffer scaling{kernels::kFp8ScalingFloats * sizeof(float)};
  gpu::DeviceBuffer state{kernels::fp8_delayed_state_floats(history_len) * sizeof(float)};
  std::int64_t casts = 0;
  DelayedCast(std::int64_t r, std::int64_t c, Fp8Type t, int len) : rows(r), cols(c), type(t), history_len(len) {
    kernels::fp8_delayed_state_reset(f32(state), history_len, nullptr);
  }
  void run(const gpu::DeviceBuffer& x) {
    gpu::launch(gpu::Fp8Cast{bf(x), rows, cols, type, static_cast<std::uint8_t*>(rowwise.data()),
                             static_cast<std::uint8_t*>(columnwise.data()), f32(scaling), f32(state), history_len,
                             casts++, Fp8Recipe::delayed},
                nullptr);
  }
  double recorded_amax() const {  // the ring slot of the last cast
    return f32_to_host(state.data(), kernels::fp8_delayed_state_floats(history_len))
        [kernels::kFp8DelayedRingAt + (casts - 1) % history_len];
  }
};

// A bf16 tensor of `rows x cols` uniform in +-amplitude, with `special` at element 7 where not 0.
gpu::DeviceBuffer tensor(std::int64_t count, double amplitude, float special = 0.0f) {
  gpu::DeviceBuffer x = amplitude > 0 ? random_bf16(count, amplitude) : gpu::DeviceBuffer(count * 2);
  if (amplitude == 0) TWIN_CUDA_CHECK(cudaMemset(x.data(), 0, count * 2));
  if (special != 0.0f) {
    const __nv_bfloat16 value = __float2bfloat16(special);
    TWIN_CUDA_CHECK(cudaMemcpy(bf(x) + 7, &value, sizeof(value), cudaMemcpyHostToDevice));
  }
  return x;
}

class Fp8DelayedTest : public ::testing::TestWithParam<Fp8Type> {};

// Sixteen casts with history 3: amplitudes that rise, fall, vanish (an all-zero tensor) and overflow (an infinity):
// each scale is the reference's, each history entry the tensor's amax, each byte the host's quantization.
TEST_P(Fp8DelayedTest, HistoryAndScaleFollowTransformerEnginesRuleCastByCast) {
  REQUIRE_GPU();
  const Fp8Type type = GetParam();
  const std::int64_t rows = 136, cols = 200;  // not multiples of the 64 x 64 tile
  const int history_len = 3;
  DelayedCast cast(rows, cols, type, history_len);
  HostDelayedScale ref{history_len, {}, 1.0f, type};
  const float inf = std::numeric_limits<float>::infinity();
  // (amplitude, a special element): after three all-zero casts and after an infinity the scale before stays.
  const std::vector<std::pair<double, float>> steps = {
      {3.0, 0}, {3.0, 0}, {40.0, 0}, {0.5, 0},    {0.5, 0}, {0.5, 0}, {0.5, 0}, {0, 0},
      {0, 0},   {0, 0},   {1.0, 0},  {0.25, inf}, {2.0, 0}, {2.0, 0}, {2.0, 0}, {2.0, 0}};
  for (std::size_t t = 0; t < steps.size(); ++t) {
    SCOPED_TRACE("cast " + std::to_string(t));
    const gpu::DeviceBuffer x = tensor(rows * cols, steps[t].first, steps[t].second);
    const std::vector<double> hx = bf16_to_host(x.data(), rows * cols);
    cast.run(x);
    const HostFp8 q = quantize_with_scale(hx, type, ref.next_scale());
    ref.record(q.amax);
    EXPECT_EQ(f32_to_host(cast.scaling.data(), 1)[0], q.scale_inv);
    EXPECT_EQ(cast.recorded_amax(), q.amax);
    EXPECT_EQ(bytes_to_host(cast.rowwise, rows * cols), q.bytes);
    EXPECT_EQ(bytes_to_host(cast.columnwise, rows * cols), transposed(q.bytes, rows, cols));
  }
}

// The round trip: a tensor cast again after itself takes the scale of its own amax, the bytes of current scaling,
// and comes back within FP8's rounding of the float64 tensor (E4M3 2^-4 relative, E5M2 2^-3).
TEST_P(Fp8DelayedTest, ACastAfterItselfRoundTripsAsCurrentScaling) {
  REQUIRE_GPU();
  const Fp8Type type = GetParam();
  const std::int64_t rows = 256, cols = 192;
  DelayedCast cast(rows, cols, type, 1);
  const gpu::DeviceBuffer x = tensor(rows * cols, 5.0);
  const std::vector<double> hx = bf16_to_host(x.data(), rows * cols);
  cast.run(x);
  cast.run(x);
  const HostFp8 current = quantize_on_host(hx, type);
  EXPECT_EQ(f32_to_host(cast.scaling.data(), 1)[0], current.scale_inv);
  EXPECT_EQ(bytes_to_host(cast.rowwise, rows * cols), current.bytes);
  std::vector<double> back(rows * cols);
  const std::vector<std::uint8_t> bytes = bytes_to_host(cast.rowwise, rows * cols);
  const double scale_inv = f32_to_host(cast.scaling.data(), 1)[0];
  for (std::size_t i = 0; i < back.size(); ++i) back[i] = fp8_value(bytes[i], type) * scale_inv;
  const double error = report(type == Fp8Type::e4m3 ? "fp8 delayed round trip e4m3" : "fp8 delayed round trip e5m2",
                              relative_error(back, hx));
  EXPECT_LT(error, type == Fp8Type::e4m3 ? 0.04 : 0.08);
}

INSTANTIATE_TEST_SUITE_P(Types, Fp8DelayedTest, ::testing::Values(Fp8Type::e4m3, Fp8Type::e5m2));

}  // namespace
}  // namespace twin::test
