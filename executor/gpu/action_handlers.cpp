// Which handlers a rank has, and what each is built over.
#include "executor/gpu/action_handlers.hpp"

#include "executor/parameters.hpp"

namespace twin::exec {

ActionHandlers::ActionHandlers(const HandlerStage& stage, const TrainingOptions& options, const StepPart& part)
    : layout_(stage.layout), tensors_(stage.tensors), parameters_(*stage.parameters) {
  const Scenario& scenario = layout_.scenario();
  const Strategy& strategy = layout_.strategy();
  if (part.pipeline_reductions && !part.pipeline_reductions->empty())
    pipeline_reduction_ = std::make_unique<PipelineReductionRun>(
        *part.pipeline_reductions, stage.rank, stage.comms, parameters_,
        part.optimizer_sharded_over_pipelines ? &scenario.training.optimizer_precision : nullptr, stage.compute);
  switch_ = std::make_unique<LayoutSwitch>(part, stage.rank, stage.parameters);
  const std::int64_t loss_tokens = part.loss_tokens > 0
                                       ? part.loss_tokens
                                       : scenario.training.global_batch_size * scenario.training.seq_length;
  dense_ = std::make_unique<DenseBlock>(
      DenseStage{layout_, parameters_, tensors_, loss_tokens, part.input_first_row, options.attention, options.seed,
                 part.first_sequence, part.micro_batch_stride},
      stage.compute);
  if (scenario.training.fp8)
    fp8_ = std::make_unique<Fp8Linears>(*scenario.training.fp8, tensors_, *dense_, layout_, stage.rank_class,
                                        stage.bindings, stage.compute, stage.comms.amax());
  ring_ = std::make_unique<ContextRingRun>(
      RingStage{layout_.shapes(), layout_.me().cp, stage.comms, tensors_, dense_->attention()});
  boundary_ = std::make_unique<PipelineBoundary>(BoundaryStage{layout_, stage.graph, stage.comms, tensors_});
  optimizer_ = std::make_unique<OptimizerRun>(
      OptimizerStage{layout_, stage.comms, parameters_, pipeline_reduction_.get(),
                     part.optimizer_sharded_over_pipelines, options.recipe, options.train_iters},
      tensors_);
  if (scenario.model.mla.enabled())
    mla_ = std::make_unique<MlaBlock>(MlaStage{layout_, parameters_, tensors_, dense_->attention()}, stage.compute);
  if (scenario.model.is_moe())
    moe_ = std::make_unique<MoeBlock>(
        MoeStage{layout_.shapes(), scenario.model.moe, placement_of(strategy, stage.rank).ep_rank,
                 stage.comms, parameters_, tensors_,
                 part.micro_batches > 0 ? part.micro_batches : strategy.num_micro_batches,
                 strategy.data_parallel_size, stage.rank, scenario.model.num_layers});
}

void ActionHandlers::start_iteration(int iteration, const std::vector<std::int32_t>& tokens, cudaStream_t compute) {
  dense_->start_iteration(iteration, tokens, compute);
  optimizer_->start_iteration(compute);
  if (moe_) moe_->start_iteration(iteration, compute);
}

}  // namespace twin::exec
