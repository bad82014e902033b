// Megatron-LM's checks of a command line that twin's arguments could fail, as they stand at kMegatronCommit:
// `validate_args` in megatron/training/arguments.py (lines named "arguments.py:N"), TransformerConfig.__post_init__
// (transformer_config.py), the argument builder (argument_utils.py) and the micro-batch calculator. A rule is
// written as Megatron computes it, with the defaults Megatron takes for an absent flag.
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/megatron_flags.hpp"

namespace twin {
namespace {

// The sizes Megatron derives before its checks.
struct Sizes {
  long long tp, pp, cp, ep, world, data_parallel;
  bool sequence_parallel;  // after Megatron turns it off at TP 1 (arguments.py:1433)
};

Sizes sizes(const MegatronArguments& a, long long world_size) {
  Sizes s{a.integer("--tensor-model-parallel-size", 1),
          a.integer("--pipeline-model-parallel-size", 1),
          a.integer("--context-parallel-size", 1),
          a.integer("--expert-model-parallel-size", 1),
          world_size,
          0,
          false};
  const long long model_parallel = s.tp * s.pp * s.cp;
  s.data_parallel = model_parallel > 0 ? world_size / model_parallel : 0;
  s.sequence_parallel = a.has("--sequence-parallel") && s.tp > 1;
  return s;
}

using Broken = std::optional<std::string>;

// Megatron's parallel sizes are positive; twin's strategies stop at 2^16 (which also keeps products in 64 bits).
Broken size_out_of_range(const MegatronArguments& a) {
  constexpr long long kMaxSize = 1 << 16;
  for (const char* flag : {"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
                           "--expert-model-parallel-size"}) {
    const long long size = a.integer(flag, 1);
    if (size < 1 || size > kMaxSize) return fmt::format("{}: expected a size in [1, {}], got {}", flag, kMaxSize, size);
  }
  return std::nullopt;
}

Broken parallel_sizes(const MegatronArguments& a, const Sizes& s) {
  if (s.world % (s.tp * s.pp * s.cp) != 0)
    return fmt::format(
        "--tensor-model-parallel-size: world size {} is not divisible by TP x PP x CP {} x {} x {} "
        "(arguments.py:432)",
        s.world, s.tp, s.pp, s.cp);
  // Absent, the global batch is one micro-batch per data-parallel rank (arguments.py:702).
  const long long micro = a.integer("--micro-batch-size", 0);
  const long long global = a.integer("--global-batch-size", micro * s.data_parallel);
  if (micro < 1 || global < micro || s.data_parallel > global / micro || global % (micro * s.data_parallel) != 0)
    return fmt::format(
        "--global-batch-size: {} must be a multiple of micro-batch size x data-parallel size {} x {} "
        "(megatron/core/num_microbatches_calculator.py:582)",
        global, micro, s.data_parallel);
  const long long heads = a.integer("--num-attention-heads", 0);
  if (heads % s.tp != 0)
    return fmt::format("--num-attention-heads: {} must be a multiple of TP {} (transformer_config.py:1446)", heads,
                       s.tp);
  const long long groups = a.has("--group-query-attention") ? a.integer("--num-query-groups", 1) : heads;
  if (groups % s.tp != 0 && s.tp % groups != 0)
    return fmt::format("--num-query-groups: {} must be a multiple or divisor of TP {} (transformer_config.py:1462)",
                       groups, s.tp);
  if (s.ep > 1 && (!a.has("--num-experts") || a.integer("--num-experts", 0) % s.ep != 0))
    return fmt::format("--expert-model-parallel-size: {} needs --num-experts, a multiple of it (arguments.py:1655)",
                       s.ep);
  if (a.has("--moe-router-enable-expert-bias") && a.text("--moe-router-score-function", "softmax") == "softmax")
    return std::string(
        "--moe-router-enable-expert-bias: needs --moe-router-score-function sigmoid or sqrtsoftplus "
        "(transformer_config.py:2617)");
  if (a.has("--moe-router-group-topk")) {
    const long long groups = a.integer("--moe-router-num-groups", 0), chosen = a.integer("--moe-router-group-topk", 0);
    if (groups < 1)
      return std::string("--moe-router-group-topk: needs --moe-router-num-groups (transformer_config.py:2677)");
    if (a.integer("--num-experts", 0) % groups != 0 || chosen > groups)
      return fmt::format("--moe-router-num-groups: {} must divide --num-experts and be at least --moe-router-group-topk "
                         "{} (transformer_config.py:2683, 2687)",
                         groups, chosen);
  }
  if (a.has("--tp-comm-overlap") && !s.sequence_parallel)
    return std::string(
        "--tp-comm-overlap: needs sequence parallelism, which Megatron turns off at TP 1 "
        "(arguments.py:1441)");
  return std::nullopt;
}

Broken sequence(const MegatronArguments& a, const Sizes& s) {
  const long long seq = a.integer("--seq-length", 0);
  if (!a.has("--max-position-embeddings") || a.integer("--max-position-embeddings", 0) < seq)
    return fmt::format("--max-position-embeddings: {} must be at least --seq-length {} (arguments.py:1354)",
                       a.text("--max-position-embeddings", "none"), seq);
  if (s.cp > 1 && seq % (2 * s.cp) != 0)
    return fmt::format("--seq-length: {} must be a multiple of 2 x CP {} (arguments.py:1336)", seq, s.cp);
  return std::nullopt;
}

// Layers over (virtual) pipeline stages: the embedding and the loss count as layers where asked (arguments.py:962).
Broken pipeline(const MegatronArguments& a, const Sizes& s) {
  // A layout states each virtual stage's layers: validate_args takes its branch instead (arguments.py:941), and
  // its own rules are the layout's (core/pipeline_layout.hpp, checked where the scenario is).
  if (a.has("--pipeline-model-parallel-layout")) return std::nullopt;
  long long layers = a.integer("--num-layers", 0);  // at most 2^40 (megatron_value_error): + 2 stays in range
  if (a.has("--account-for-embedding-in-pipeline-split")) ++layers;
  if (a.has("--account-for-loss-in-pipeline-split")) ++layers;
  if (layers % s.pp != 0)
    return fmt::format(
        "--num-layers: {} (with the embedding and loss where counted) must be divisible by PP {} "
        "(arguments.py:997)",
        layers, s.pp);
  long long virtual_stages = a.integer("--num-virtual-stages-per-pipeline-rank", 1);
  if (a.has("--num-layers-per-virtual-pipeline-stage")) {
    const long long per_virtual = a.integer("--num-layers-per-virtual-pipeline-stage", 1);
    if (per_virtual < 1 || (layers / s.pp) % per_virtual != 0)
      return fmt::format(
          "--num-layers-per-virtual-pipeline-stage: {} must divide the {} layers of a pipeline stage "
          "(arguments.py:972)",
          per_virtual, layers / s.pp);
    virtual_stages = layers / s.pp / per_virtual;
  }
  if (virtual_stages > 1 && s.pp < 2)  // --overlap-p2p-communication is on by default (arguments.py:3118)
    return std::string(
        "--num-layers-per-virtual-pipeline-stage: the interleaved schedule needs PP > 1 "
        "(arguments.py:1002)");
  return std::nullopt;
}

Broken optimizer_and_overlaps(const MegatronArguments& a) {
  const bool fsdp = a.has("--use-megatron-fsdp");
  if (a.has("--overlap-param-gather") && !a.has("--use-distributed-optimizer") && !fsdp)
    return std::string(
        "--overlap-param-gather: needs --use-distributed-optimizer or --use-megatron-fsdp "
        "(arguments.py:1025)");
  if (a.has("--overlap-param-gather") && !a.has("--overlap-grad-reduce"))
    return std::string("--overlap-param-gather: needs --overlap-grad-reduce (arguments.py:1028)");
  if (a.has("--fp16") && a.has("--bf16")) return std::string("--fp16: not with --bf16 (arguments.py:1196)");
  if (a.has("--swiglu") && a.has("--squared-relu"))
    return std::string("--squared-relu: not with --swiglu (megatron/training/argument_utils.py:321)");
  if (a.has("--swiglu") && a.has("--quick-geglu"))
    return std::string("--quick-geglu: not with --swiglu (megatron/training/argument_utils.py:324)");
  if (a.has("--moe-grouped-gemm") && a.has("--num-experts") && !a.has("--disable-bias-linear") &&
      !a.has("--no-bias-dropout-fusion"))
    return std::string(
        "--no-bias-dropout-fusion: needed by grouped experts with biases (no --disable-bias-linear; "
        "megatron/core/transformer/moe/experts.py:205)");
  const std::string granularity = a.text("--recompute-granularity", "");
  if (granularity == "selective" && a.has("--recompute-method"))
    return std::string("--recompute-method: not with --recompute-granularity selective (arguments.py:1425)");
  if (granularity == "full" && (!a.has("--recompute-method") || !a.has("--recompute-num-layers")))
    return std::string(
        "--recompute-granularity full: needs --recompute-method and --recompute-num-layers "
        "(transformer_config.py:1913, 1919)");
  return std::nullopt;
}

Broken megatron_fsdp(const MegatronArguments& a, const std::optional<std::string>& device_max_connections) {
  const bool fsdp = a.has("--use-megatron-fsdp");
  if (!fsdp) {
    if (a.text("--ckpt-format", "") == "fsdp_dtensor")
      return std::string("--ckpt-format fsdp_dtensor: needs --use-megatron-fsdp (arguments.py:1676)");
    return std::nullopt;
  }
  if (device_max_connections == "1")
    return std::string("--use-megatron-fsdp: CUDA_DEVICE_MAX_CONNECTIONS must be unset or above 1 (arguments.py:1166)");
  if (a.text("--ckpt-format", "torch_dist") != "fsdp_dtensor")
    return std::string("--use-megatron-fsdp: needs --ckpt-format fsdp_dtensor (arguments.py:1169)");
  const std::string optimizer = a.text("--optimizer", "adam");
  if (optimizer != "adam" && optimizer != "sgd")
    return fmt::format("--optimizer: Megatron-FSDP takes adam or sgd, got {} (arguments.py:1150)", optimizer);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> megatron_rule_broken(const MegatronArguments& arguments, long long world_size,
                                                const std::optional<std::string>& device_max_connections) {
  if (auto broken = size_out_of_range(arguments)) return broken;
  const Sizes s = sizes(arguments, world_size);
  if (auto broken = parallel_sizes(arguments, s)) return broken;
  if (auto broken = sequence(arguments, s)) return broken;
  if (auto broken = pipeline(arguments, s)) return broken;
  if (auto broken = optimizer_and_overlaps(arguments)) return broken;
  return megatron_fsdp(arguments, device_max_connections);
}

}  // namespace twin
