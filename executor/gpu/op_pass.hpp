// One op as the interpreter hands it to a handler: the op, its binding, its micro-batch and unit (a layer, the
// embedding or the output layer), the scratch of its stream and the stream it runs on.
#pragma once
#include <cuda_runtime.h>

#include "core/op_graph.hpp"
#include "executor/gpu/stream_scratch.hpp"
#include "executor/op_binding.hpp"

namespace twin::exec {

struct OpPass {
  const Op& op;
  const OpBinding& binding;
  int mb = 0, unit = 0;
  StreamScratch& scratch;
  cudaStream_t stream = nullptr;
};

}  // namespace twin::exec
