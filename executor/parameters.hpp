// The weights one rank holds, grouped in units as the op graph reduces and gathers them (the embedding,
// each layer, the output layer): per unit one flat bf16 parameter buffer, one flat bf16 gradient buffer,
// and fp32 master weights with AdamW moments for the part this rank updates (all of it, or its ZeRO shard).
// Every weight is initialised by global index, so any TP/PP/DP split holds the single-GPU model.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/op.hpp"
#include "core/scenario.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

using bf16 = __nv_bfloat16;

struct WeightTensor {
  std::string name;         // "L3.qkv", "embedding", "output", "L3.input_norm"
  OpRole role = OpRole::none;
  std::int64_t rows = 0, cols = 0;  // this rank's shard; linears as [in, out] (y = x W)
  std::int64_t offset = 0;  // elements into the unit's flat buffers
  bool is_norm = false;     // replicated over TP: its gradient is summed over TP under SP, counted once in norms
  kernels::ShardMap shard;  // where the shard lies in the full weight
  float init_stddev = 0;    // 0: ones (norm weights)
  std::uint64_t seed = 0;
  std::int64_t elements() const { return rows * cols; }
};

struct ParameterUnit {
  std::int32_t id = kNoParameterUnit;  // layer index, kEmbeddingUnit or kHeadUnit
  std::vector<WeightTensor> tensors;
  std::int64_t elements = 0;           // sum of the tensors
  std::int64_t padded = 0;             // rounded up to a multiple of the data group (ZeRO shards)
  std::int64_t shard_begin = 0, shard_elements = 0;  // this rank's 1/dp of `padded`
  bool sharded_optimizer = false;      // ZeRO >= 1: master and moments only for the shard
  bf16* params = nullptr;
  bf16* grads = nullptr;
  float* master = nullptr;             // for [update_begin, update_begin + update_elements)
  float* adam_m = nullptr;
  float* adam_v = nullptr;
  std::int64_t update_begin() const { return sharded_optimizer ? shard_begin : 0; }
  std::int64_t update_elements() const { return sharded_optimizer ? shard_elements : padded; }
  const WeightTensor& tensor(OpRole role) const;
};

struct RankPlacement {
  int tp_rank = 0, dp_rank = 0, stage = 0;
};

class StageParameters {
 public:
  // Allocates and initialises every unit of `placement.stage`. Dense Llama-style models only (RMSNorm,
  // SwiGLU or GeLU, RoPE, no biases, untied embeddings); throws std::invalid_argument otherwise.
  StageParameters(const Scenario& scenario, const Strategy& strategy, const RankPlacement& placement,
                  std::uint64_t seed, cudaStream_t stream);
  ~StageParameters();
  StageParameters(const StageParameters&) = delete;
  StageParameters& operator=(const StageParameters&) = delete;

  ParameterUnit& unit(std::int32_t id);
  std::vector<ParameterUnit*> units();
  std::int64_t total_elements() const;
  // Zeroes every gradient buffer (iteration start).
  void zero_grads(cudaStream_t stream);

 private:
  std::map<std::int32_t, ParameterUnit> units_;
  std::vector<void*> allocations_;
};

// The units a rank of `stage` holds, their tensors and shard maps: no GPU involved (tests use it).
std::vector<ParameterUnit> plan_parameter_units(const Scenario& scenario, const Strategy& strategy,
                                                const RankPlacement& placement, std::uint64_t seed);

}  // namespace twin::exec
