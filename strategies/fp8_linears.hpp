// What FP8 training (scenario training.fp8, core/fp8.hpp) adds per GPU: which weights Transformer Engine keeps
// FP8 copies of, the bytes its casts move and the bytes its copies and scaling state hold. The lowering
// (strategies/lowering_linears.cpp, lowering_pipeline.cpp) and the memory model (strategies/memory.cpp) read them.
#pragma once
#include <cstdint>

#include "core/fp8.hpp"
#include "core/op.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {

// The operands an FP8 GEMM of `recipe` reads (GemmShape::inputs) in the linear's product `pass`: block-wise, the
// weight gradient's two activations are both scaled per 1x128 block.
GemmInputs fp8_gemm_inputs(Fp8Recipe recipe, GemmPass pass);

// The weights of pipeline stage `stage` per GPU that run in FP8: the linear weights (attention's QKV and
// projection, the dense MLP's, the experts') of its layers that layer_runs_fp8 keeps in FP8. The router, the
// norms, the biases, the embedding and the output layer stay in 16 bits (Megatron's output layer is no TE module).
RankParameters fp8_weights_per_rank(const Scenario& scenario, const Strategy& strategy, int stage);

// FP8 linear modules (each with its input, weight and output-gradient scaling state) of one layer per GPU: QKV,
// projection, FC1, FC2, and two per local expert.
int fp8_modules_per_layer(const ModelConfig& model, int layer, int expert_parallel);

// Delayed scaling's amax reduction after a forward (`forward`) or a backward of chunk `chunk` of stage `stage` for
// one micro-batch: the bytes Transformer Engine's reduce_and_update_fp8_tensors all-reduces (max) over the amax
// group, every FP8 module's amaxes of that pass concatenated (module/base.py: 3 a GEMM forward: input, weight,
// output; 2 backward: output gradient, input gradient; fp32). 0 where none runs: another recipe, an amax group
// (TP x CP x DP) of one GPU, or no FP8 layer in the chunk.
std::int64_t fp8_amax_reduction_bytes(const Scenario& scenario, const Strategy& strategy, int stage, int chunk,
                                      bool forward);

// Bytes a cast of `elements` bf16 elements moves: the read (2 bytes), the rowwise copy (1) and, `columnwise`,
// the columnwise one (1), each with its scales; current scaling (tensorwise) reads the tensor once more for its
// amax before casting. A cast of `source_bytes` per element (4: the fp32 main weights) reads that instead.
std::int64_t fp8_cast_bytes(Fp8Recipe recipe, std::int64_t elements, bool columnwise, double source_bytes = 2);

// Bytes a transpose of an FP8 copy of `elements` elements moves (an fp8_transpose op: Transformer Engine's
// _create_transpose of gathered rows): the rowwise copy read and the columnwise one written, a byte an element each.
// The scale record is shared, not moved.
std::int64_t fp8_transpose_bytes(std::int64_t elements);

// Bytes the FP8 copies and scaling state of the stage's FP8 weights hold per GPU beyond the 16-bit weights the
// memory model counts: both copies (rowwise and columnwise, the transposed or column-scaled one the data and
// weight gradients read) with their scales, less the 16-bit weight itself under param_gather (the FP8 copy is the
// parameter then), plus each module's amax history (3 tensors x amax_history_len x 4 bytes) and scales.
double fp8_state_bytes(const Scenario& scenario, const Strategy& strategy, int stage);

}  // namespace twin
