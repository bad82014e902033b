// A scenario that simulates in a second (two candidates of a 4-layer llama2-7b on four H100s), for the CLI tests
// of what happens around a run rather than of its results.
#pragma once
#include <nlohmann/json.hpp>

namespace twin::test {

inline nlohmann::json small_scenario() {
  return nlohmann::json::parse(R"({
    "name": "small", "model": { "preset": "llama2-7b", "num_layers": 4 },
    "training": { "seq_length": 2048, "global_batch_size": 8 },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 4 } ] },
    "search": { "tensor_model_parallel_size": [1, 2], "pipeline_model_parallel_size": [1],
                "micro_batch_size": [1], "zero_stage": [1], "recompute": ["none"] } })");
}

}  // namespace twin::test
