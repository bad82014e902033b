// The handlers of one rank's action families, each owning its state: the dense block, the FP8 linears, MoE's experts
// block, multi-latent attention, context parallelism's ring, the pipeline boundaries, the reductions across
// pipelines, the layout switch and the optimizer. Which of them a rank has follows from its scenario and step part;
// `run` is the interpreter's one dispatch of an op's action to the handler function that runs it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "core/op_graph.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/context_ring_run.hpp"
#include "executor/gpu/dense_block.hpp"
#include "executor/gpu/fp8_linears.hpp"
#include "executor/gpu/layout_switch.hpp"
#include "executor/gpu/mla_block.hpp"
#include "executor/gpu/moe_block.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/optimizer_run.hpp"
#include "executor/gpu/pipeline_boundary.hpp"
#include "executor/gpu/pipeline_reduction_run.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/gpu/step_part.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "executor/gpu/training_options.hpp"
#include "executor/op_binding.hpp"

namespace twin::exec {

// What the handlers are built over; every reference outlives them.
struct HandlerStage {
  const StageLayout& layout;
  const IterationGraph& graph;
  const RankClass& rank_class;
  const std::vector<OpBinding>& bindings;
  const std::shared_ptr<StageParameters>& parameters;
  TensorStore& tensors;
  Communicators& comms;
  int rank = 0;
  cudaStream_t compute = nullptr;
};

class ActionHandlers {
 public:
  ActionHandlers(const HandlerStage& stage, const TrainingOptions& options, const StepPart& part);
  ActionHandlers(const ActionHandlers&) = delete;
  ActionHandlers& operator=(const ActionHandlers&) = delete;

  // Runs the op of `pass` with the handler of its action (executor/gpu/dispatch.cpp).
  void run(const OpPass& pass);
  // Before an iteration's first op: its tokens, the optimizer's step, the routers' loads.
  void start_iteration(int iteration, const std::vector<std::int32_t>& tokens, cudaStream_t compute);

  DenseBlock& dense() const { return *dense_; }
  LayoutSwitch& layout_switch() const { return *switch_; }
  OptimizerRun& optimizer() const { return *optimizer_; }
  Fp8Linears* fp8() const { return fp8_.get(); }                            // training.fp8 only
  MoeBlock* moe() const { return moe_.get(); }                              // MoE models only
  PipelineReductionRun* pipeline_reduction() const { return pipeline_reduction_.get(); }  // asymmetric plans only

 private:
  const StageLayout& layout_;
  TensorStore& tensors_;
  StageParameters& parameters_;
  // Destroyed in the reverse of this order: the optimizer first, the dense block (whose attention the ring and MLA
  // use) last.
  std::unique_ptr<DenseBlock> dense_;
  std::unique_ptr<Fp8Linears> fp8_;
  std::unique_ptr<MoeBlock> moe_;
  std::unique_ptr<MlaBlock> mla_;
  std::unique_ptr<ContextRingRun> ring_;
  std::unique_ptr<PipelineBoundary> boundary_;
  std::unique_ptr<PipelineReductionRun> pipeline_reduction_;
  std::unique_ptr<LayoutSwitch> switch_;
  std::unique_ptr<OptimizerRun> optimizer_;
};

}  // namespace twin::exec
