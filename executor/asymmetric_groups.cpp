#include "executor/asymmetric_groups.hpp"

#include <algorithm>

#include "strategies/heterogeneous/asymmetric_plan.hpp"

namespace twin::exec {

AsymmetricGroups asymmetric_groups(const PlanGraphs& lowered, const std::vector<PipelineReduction>& reductions) {
  const AsymmetricPlanDetail& plan = lowered.asymmetric.value();
  AsymmetricGroups out;
  out.stage_of_rank.assign(static_cast<std::size_t>(lowered.world_size()), 0);
  std::size_t deepest = 0;
  for (const AsymmetricPipeline& pipeline : plan.pipelines) {
    std::vector<int> all;
    for (std::size_t s = 0; s < pipeline.stages.size(); ++s) {
      const std::vector<int>& devices = pipeline.stages[s].devices;
      out.tensor.push_back(devices);
      all.insert(all.end(), devices.begin(), devices.end());
      for (int rank : devices) out.stage_of_rank.at(static_cast<std::size_t>(rank)) = static_cast<int>(s);
    }
    out.pipeline.push_back(all);
    deepest = std::max(deepest, pipeline.stages.size());
  }
  for (int backward = 0; backward < 2; ++backward)
    for (int s = 0; s + 1 < static_cast<int>(deepest); ++s) {
      AsymmetricGroups::Boundary boundary;
      boundary.from_stage = backward ? s + 1 : s;
      boundary.to_stage = backward ? s : s + 1;
      for (const AsymmetricPipeline& pipeline : plan.pipelines) {
        if (static_cast<int>(pipeline.stages.size()) <= s + 1) continue;
        const AsymmetricStage& from = pipeline.stages[static_cast<std::size_t>(boundary.from_stage)];
        const AsymmetricStage& to = pipeline.stages[static_cast<std::size_t>(boundary.to_stage)];
        std::vector<int> group = from.devices;
        group.insert(group.end(), to.devices.begin(), to.devices.end());
        boundary.groups.push_back(std::move(group));
        // A side shards the rows where its stage runs sequence parallel (stage_strategy: the shared switch, TP > 1).
        boundary.sides.push_back({static_cast<int>(from.devices.size()), static_cast<int>(to.devices.size()),
                                  stage_strategy(plan.shared, pipeline, boundary.from_stage).sequence_parallel,
                                  stage_strategy(plan.shared, pipeline, boundary.to_stage).sequence_parallel});
      }
      out.boundaries.push_back(std::move(boundary));
    }
  // Under ZeRO-1 a GPU's parts hold elements of every pipeline's copy: the gradient norm sums over every GPU.
  if (plan.shared.zero_stage >= 1 && plan.pipelines.size() > 1) {
    std::vector<int> all;
    for (const std::vector<int>& p : out.pipeline) all.insert(all.end(), p.begin(), p.end());
    std::sort(all.begin(), all.end());
    out.pipeline = {all};
  }
  out.reduction_rounds = reduction_group_rounds(reductions);
  return out;
}

}  // namespace twin::exec
