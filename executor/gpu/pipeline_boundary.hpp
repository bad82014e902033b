// The interpreter's handler of pipeline boundaries: the graph's sends and receives of activations and gradients
// between stages (Megatron's p2p communication), and double strand's transfers that carry a forward strand's
// activation and a backward strand's gradient at once. It moves the tensors a stage keeps at a boundary: a chunk's
// last layer's output and the gradient that arrives for it; a chunk's received input and the gradient sent back for
// it, each transfer one NCCL group. One public function per action: the runtime's dispatch names each.
#pragma once
#include <cuda_runtime.h>

#include "core/op_graph.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/tensor_store.hpp"

namespace twin::exec {

// What a boundary reads from the stage that runs it.
struct BoundaryStage {
  const StageLayout& layout;
  const IterationGraph& graph;  // the classes a pipeline op names as its peer
  Communicators& comms;
  TensorStore& tensors;
};

class PipelineBoundary {
 public:
  explicit PipelineBoundary(const BoundaryStage& stage) : stage_(stage) {}

  void send_activation(const OpPass& p);
  void recv_activation(const OpPass& p);
  void send_gradient(const OpPass& p);
  void recv_gradient(const OpPass& p);
  void send_strands(const OpPass& p);
  void recv_strands(const OpPass& p);

 private:
  // The boundary to (sending) or from the op's peer stage.
  const Communicators::Boundary& boundary(const Op& op, bool sending) const;
  // This GPU's rows of `buffer` to or from the boundary's other side (inside the caller's NCCL group).
  // The rows of `unit`'s layout (in a per-layer plan every layout holds the same rows on a GPU; the part
  // strategy's shapes may not, where a block of GPUs holds part of a sample).
  void move_rows(const Communicators::Boundary& boundary, void* buffer, bool sending, int unit, cudaStream_t stream);
  void activation_out(int mb, int chunk, const Communicators::Boundary& to, cudaStream_t stream);
  void activation_in(int mb, int chunk, const Communicators::Boundary& from, cudaStream_t stream);
  void gradient_out(int mb, int chunk, const Communicators::Boundary& to, cudaStream_t stream);
  void gradient_in(int mb, int chunk, const Communicators::Boundary& from, cudaStream_t stream);

  BoundaryStage stage_;
};

}  // namespace twin::exec
