// Where a runtime's iteration sits in a training step that runs several parts one after another (hot switching's
// phases, strategies/families/plan_graphs.hpp); the defaults describe a step of one part.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <nccl.h>

#include "executor/gpu/stage_parameters.hpp"
#include "executor/pipeline_reduction.hpp"
#include "executor/resharding.hpp"

namespace twin::exec {

struct StepPart {
  // The part's parameters, shared by the parts of one layout (null: the runtime makes its own).
  std::shared_ptr<StageParameters> parameters;
  // A later part of the step: its gradients start from the earlier parts' (the switch into it puts them where
  // its reduction adds them in once) and every weight-gradient op adds to them.
  bool adds_gradients = false;
  bool first() const { return !adds_gradients; }
  std::int64_t loss_tokens = 0;    // tokens the step's loss averages over; 0: this part's global batch
  std::int64_t micro_batches = 0;  // micro-batches per data-parallel rank over the whole step; 0: this part's
  // The first row of the part's embedding rows among the rows of the sequences its run reads (TokenShare's
  // inputs.first_row: an embedding beside a Ulysses layer holds a shard of its group's samples), where its learned
  // positions start. 0: whole sequences.
  std::int64_t input_first_row = 0;
  // The step's sequence of micro-batch m's first row: first_sequence + m * micro_batch_stride (TokenShare's, with its
  // inputs' first), where hidden dropout's masks are keyed (executor/dropout_key.hpp).
  std::int64_t first_sequence = 0, micro_batch_stride = 0;
  // The switch into the part, run at the start of its iteration (timed with it): from the parameters of the part
  // before (the step's last part for the first), by `switch_blocks` (executor/resharding.hpp) over
  // `switch_comm` when they are another layout's. Null: no switch (a step of one part).
  std::shared_ptr<StageParameters> switch_from;
  std::vector<ReshardBlock> switch_blocks;
  ncclComm_t switch_comm = nullptr;
  // An asymmetric plan's gradient reductions across its pipelines (every rank's; empty for one pipeline): the
  // graph's ring ops run them (Action::pipelines_reduce).
  std::shared_ptr<const std::vector<PipelineReduction>> pipeline_reductions;
  bool optimizer_sharded_over_pipelines = false;  // its ZeRO-1: the AdamW state lives in the reductions' parts
};

}  // namespace twin::exec
