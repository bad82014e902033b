// A Ulysses layer's all-to-alls (DeepSpeed-Ulysses). The group's u GPUs each hold T rows of the block's u T
// (a run of the block's sequences) with every head's columns: the sequence layout, [T, W]. Around attention
// each holds all u T rows with its own H/u query heads and G/u key-value groups: the heads layout, [u T, w],
// the columns of each of Q, K and V those Megatron TP would give GPU r of u. So, to heads: GPU r sends peer p
// its rows' columns of p's heads (a strided column block per Q, K, V: cudaMemcpy2DAsync packs them) and
// receives peer p's rows into rows [p T, (p + 1) T); to the sequence layout: rows [p T, (p + 1) T) go to peer
// p whole, and what arrives is unpacked into p's columns. One grouped NCCL call each way.
#include <array>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "executor/gpu/stage_runtime.hpp"

namespace twin::exec {
namespace {

constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;

// One of Q, K, V (or the attention output's one): where peer 0's columns start in the sequence layout's row,
// how many columns each peer has, and where they sit in the heads layout's row.
struct Segment {
  std::int64_t first_column = 0, width = 0, heads_column = 0;
};

}  // namespace

void StageRuntime::ulysses_exchange(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const UnitLayout& layout = this->layout(unit);
  if (!layout.ulysses) throw std::logic_error("executor: a Ulysses all-to-all in a layer of another layout");
  const lowering::RankShapes& s = layout.shapes;
  const int u = s.tp;
  const std::int64_t rows = s.tokens_local, d = s.d;
  // The QKV linear's tensors carry Q, K and V; the attention output's carry the query heads only.
  const bool qkv = b.subject == OpRole::qkv_projection;
  std::vector<Segment> segments{{0, s.heads * d, 0}};
  if (qkv) {
    segments.push_back({u * s.heads * d, s.groups * d, s.heads * d});
    segments.push_back({u * (s.heads + s.groups) * d, s.groups * d, (s.heads + s.groups) * d});
  }
  std::int64_t w = 0;
  for (const Segment& segment : segments) w += segment.width;
  const std::int64_t wide = u * w;  // W: the sequence layout's row
  if (op.bytes != rows * wide * static_cast<std::int64_t>(kBf16))
    throw std::logic_error(fmt::format("executor: a Ulysses all-to-all of {} bytes in the graph moves {} here",
                                       op.bytes, rows * wide * static_cast<std::int64_t>(kBf16)));

  // The tensor named by the op, in its two layouts: a value's heads layout is its gathered form, a gradient's
  // its gathered gradient.
  const layer::Block& block = layer::block_of(b.subject);
  const bool gradient = op.linear_tensor == LinearTensor::input_gradient ||
                        op.linear_tensor == LinearTensor::output_gradient;
  const Tensor tensor = op.linear_tensor == LinearTensor::output || op.linear_tensor == LinearTensor::output_gradient
                            ? block.output
                            : block.input;
  const Act sequence{tensor, gradient ? Form::gradient : Form::value};
  const Act heads{tensor, gradient ? Form::gradient_gathered : Form::gathered};
  const bool to_heads = b.action == Action::ulysses_to_heads;
  auto* from = static_cast<bf16*>(get(mb, unit, to_heads ? sequence : heads));
  auto* to = static_cast<bf16*>(make(mb, unit, to_heads ? heads : sequence, rows * wide * kBf16, stream));

  // Peer p's block of the heads layout ([T, w]) in the sequence layout ([T, W]): its columns of each segment.
  void* staging = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(&staging, rows * wide * kBf16, stream));
  auto* blocks = static_cast<bf16*>(staging);
  const auto columns = [&](bool pack) {
    for (int p = 0; p < u; ++p)
      for (const Segment& segment : segments) {
        bf16* packed = blocks + p * rows * w + segment.heads_column;
        bf16* spread = (pack ? from : to) + segment.first_column + p * segment.width;
        TWIN_CUDA_CHECK(cudaMemcpy2DAsync(pack ? packed : spread, (pack ? w : wide) * kBf16, pack ? spread : packed,
                                          (pack ? wide : w) * kBf16, segment.width * kBf16, rows,
                                          cudaMemcpyDeviceToDevice, stream));
      }
  };
  if (to_heads) columns(true);
  const bf16* sent = to_heads ? blocks : from;
  bf16* received = to_heads ? to : blocks;
  TWIN_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < u; ++p) {
    TWIN_NCCL_CHECK(ncclSend(sent + p * rows * w, rows * w, ncclBfloat16, p, layout.tensor, stream));
    TWIN_NCCL_CHECK(ncclRecv(received + p * rows * w, rows * w, ncclBfloat16, p, layout.tensor, stream));
  }
  TWIN_NCCL_CHECK(ncclGroupEnd());
  if (!to_heads) columns(false);
  TWIN_CUDA_CHECK(cudaFreeAsync(staging, stream));
  // The sequence layout of a value is read again by no one (the QKV output) or by the projection (kept); the
  // heads layout of the attention output by the attention backward (kept); gradients are used once.
  if (gradient || (to_heads && op.linear_tensor == LinearTensor::output))
    release(mb, unit, to_heads ? sequence : heads, stream);
}

}  // namespace twin::exec
