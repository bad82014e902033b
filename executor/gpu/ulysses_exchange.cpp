// A Ulysses layer's all-to-alls (DeepSpeed-Ulysses). The group's u GPUs each hold T rows of the block's u T
// (a run of the block's sequences) with every head's columns: the sequence layout, [T, W]. Around attention
// each holds all u T rows with its own H/u query heads and G/u key-value groups: the heads layout, [u T, w],
// the columns of each of Q, K and V those Megatron TP would give GPU r of u. So, to heads: GPU r sends peer p
// its rows' columns of p's heads (a strided column block per Q, K, V: kernels::copy_bf16_rows packs them) and
// receives peer p's rows into rows [p T, (p + 1) T); to the sequence layout: rows [p T, (p + 1) T) go to peer
// p whole, and what arrives is unpacked into p's columns. One grouped NCCL call each way.
#include "executor/gpu/ulysses_exchange.hpp"

#include <array>
#include <stdexcept>

#include <fmt/format.h>

#include "executor/parameters.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {
namespace {

using kernels::bf16;
constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;

}  // namespace

void ulysses_exchange(const OpPass& p, const UnitLayout& layout, TensorStore& tensors) {
  const Op& op = p.op;
  const OpBinding& b = p.binding;
  const int mb = p.mb, unit = p.unit;
  cudaStream_t stream = p.stream;
  if (!layout.ulysses) throw std::logic_error("executor: a Ulysses all-to-all in a layer of another layout");
  const lowering::RankShapes& s = layout.shapes;
  const int u = s.tp;
  const std::int64_t rows = s.tokens_local;
  // Peer p's columns of the sequence layout's row: the QKV blocks TP would give rank p (qkv_column_blocks); the
  // attention output's (the projection's input) carry its query block only.
  const std::size_t block_count = b.subject == OpRole::qkv_projection ? 3 : 1;
  const auto blocks_of = [&](int p) { return qkv_column_blocks(s.heads, s.groups, s.d, u, p); };
  std::int64_t w = 0;  // a peer's columns: the heads layout's row
  for (std::size_t k = 0; k < block_count; ++k) w += blocks_of(0)[k].width;
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
  auto* from = static_cast<bf16*>(tensors.get(mb, unit, to_heads ? sequence : heads));
  auto* to = static_cast<bf16*>(tensors.make(mb, unit, to_heads ? heads : sequence, rows * wide * kBf16, stream));

  // Peer p's rows of the heads layout ([T, w]) are its column blocks of the sequence layout's ([T, W]).
  void* staging = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(&staging, rows * wide * kBf16, stream));
  auto* staged = static_cast<bf16*>(staging);  // peer p's [T, w] at row p T
  const auto columns = [&](bool pack) {
    for (int p = 0; p < u; ++p) {
      std::int64_t heads_column = 0;
      for (std::size_t k = 0; k < block_count; ++k) {
        const ColumnBlock column = blocks_of(p)[k];
        bf16* packed = staged + p * rows * w + heads_column;
        bf16* spread = (pack ? from : to) + column.first_column;
        kernels::copy_bf16_rows(pack ? packed : spread, pack ? w : wide, pack ? spread : packed, pack ? wide : w,
                                rows, column.width, stream);
        heads_column += column.width;
      }
    }
  };
  if (to_heads) columns(true);
  const bf16* sent = to_heads ? staged : from;
  bf16* received = to_heads ? to : staged;
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
    tensors.release(mb, unit, to_heads ? sequence : heads, stream);
}

}  // namespace twin::exec
