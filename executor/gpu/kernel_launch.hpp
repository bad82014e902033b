// An op's kernels through its kind's entry (gpu/op_kernels.hpp), the entry calibration times for the kind: the
// op must be of the entry's kind and bound to an action that runs it (kernel_entry, executor/action.hpp), so
// that an op's CUPTI region holds the kernels its kind's calibration measured.
#pragma once
#include <stdexcept>

#include <fmt/format.h>

#include "executor/action.hpp"
#include "executor/op_binding.hpp"
#include "gpu/op_kernels.hpp"
#include "strategies/lowering_emitter.hpp"

namespace twin::exec {

template <class Call>
void launch_op(const Op& op, const OpBinding& binding, const Call& call, cudaStream_t stream) {
  if (op.kind != Call::kind || kernel_entry(binding.action) != Call::kind)
    throw std::logic_error(fmt::format("executor: {} bound to {} launches the {} entry", to_string(op.kind),
                                       to_string(binding.action), to_string(Call::kind)));
  gpu::launch(call, stream);
}

// The model's quick GeGLU terms as the rank's shapes carry them, for an activation op's entry.
inline kernels::GluTerms glu_terms(const lowering::RankShapes& s) {
  return gpu::glu_terms(s.glu_linear_offset, s.activation_func_clamp_value);
}

}  // namespace twin::exec
