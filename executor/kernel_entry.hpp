// Which kernel entry (gpu/op_kernels.hpp, one per op kind calibration times as a kernel of twin's own) each action
// of the executor launches: the op kind whose entry it is, or none where the action runs GEMMs, NCCL calls or
// kernels no op kind is timed by (context parallelism's ring blocks and merges, the router's routing). Pure CPU
// code: tests/executor/kernel_entry_test.cpp holds it against core/op_kinds.hpp and the lowered graphs, and the
// interpreter refuses an op whose kind is not its action's entry (executor/gpu/kernel_launch.hpp).
#pragma once
#include <optional>

#include "core/op.hpp"
#include "executor/op_binding.hpp"

namespace twin::exec {

std::optional<OpKind> kernel_entry(Action action);

}  // namespace twin::exec
