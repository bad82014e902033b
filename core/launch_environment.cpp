// Integers are parsed strictly (std::from_chars over the whole value): "2x" or "" as a rank would otherwise
// become rank 2 or rank 0 and hang the rendezvous instead of failing with a message.
#include "core/launch_environment.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

namespace twin {
namespace {

std::optional<int> read_int(const EnvironmentLookup& environment, const std::string& name) {
  const std::optional<std::string> text = environment(name);
  if (!text) return std::nullopt;
  int value = 0;
  const char* end = text->data() + text->size();
  auto [stop, error] = std::from_chars(text->data(), end, value);
  if (text->empty() || error != std::errc() || stop != end)
    throw std::runtime_error(fmt::format("environment variable {}=\"{}\": expected an integer", name, *text));
  return value;
}

int required_int(const EnvironmentLookup& environment, const std::string& name, const std::string& because) {
  if (auto value = read_int(environment, name)) return *value;
  throw std::runtime_error(fmt::format("environment variable {} is unset; expected it {}", name, because));
}

RankIdentity checked(RankIdentity identity, const std::string& rank_name, const std::string& size_name) {
  if (identity.world_size < 1)
    throw std::runtime_error(fmt::format("{}={}: expected a world size of at least 1", size_name, identity.world_size));
  if (identity.rank < 0 || identity.rank >= identity.world_size)
    throw std::runtime_error(fmt::format("{}={}: expected a rank in [0, {}) ({}={})", rank_name, identity.rank,
                                         identity.world_size, size_name, identity.world_size));
  if (identity.local_rank < 0)
    throw std::runtime_error(fmt::format("local rank {} under {}: expected 0 or more", identity.local_rank,
                                         identity.launcher));
  return identity;
}

// A launcher's rank, size and local-rank variables: nullopt when its rank is unset; the other two then required.
std::optional<RankIdentity> identity_from(const EnvironmentLookup& environment, const std::string& launcher,
                                          const std::string& rank_name, const std::string& size_name,
                                          const std::string& local_name) {
  const std::optional<int> rank = read_int(environment, rank_name);
  if (!rank) return std::nullopt;
  const std::string because = fmt::format("beside {} (set by {})", rank_name, launcher);
  RankIdentity identity{*rank, required_int(environment, size_name, because),
                        required_int(environment, local_name, because), launcher};
  return checked(identity, rank_name, size_name);
}

}  // namespace

EnvironmentLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

std::optional<RankIdentity> rank_from_environment(const EnvironmentLookup& environment) {
  if (auto twin = identity_from(environment, "twin", "TWIN_RANK", "TWIN_WORLD_SIZE", "TWIN_LOCAL_RANK")) return twin;
  // RANK alone is too common a name to mean torchrun; RANK with WORLD_SIZE is torch.distributed's env:// contract.
  if (environment("RANK") && environment("WORLD_SIZE"))
    return identity_from(environment, "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK");
  if (auto mpi = identity_from(environment, "mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_LOCAL_RANK"))
    return mpi;
  return identity_from(environment, "srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID");
}

std::vector<EnvironmentDecision> nccl_environment_decisions(const RankIdentity& identity,
                                                            const EnvironmentLookup& environment) {
  std::vector<EnvironmentDecision> decisions;
  if (auto nvls = environment("NCCL_NVLS_ENABLE")) {
    decisions.push_back({"NCCL_NVLS_ENABLE", *nvls, false,
                         fmt::format("NCCL_NVLS_ENABLE={} kept as set in the environment", *nvls)});
  } else {
    decisions.push_back({"NCCL_NVLS_ENABLE", "0", true,
                         "NCCL_NVLS_ENABLE=0 set (it was unset): NVLink multicast off, as twin's profiles were "
                         "measured; set NCCL_NVLS_ENABLE to choose"});
  }
  if (identity.world_size == 1) return decisions;
  if (auto comm_id = environment("NCCL_COMM_ID")) {
    // Under twin's own launcher the parent chose it and said so (local_comm_id_decision).
    if (identity.launcher == "twin") return decisions;
    decisions.push_back({"NCCL_COMM_ID", *comm_id, false,
                         fmt::format("NCCL_COMM_ID={} kept as set in the environment", *comm_id)});
    return decisions;
  }
  const std::optional<std::string> address = environment("MASTER_ADDR");
  const std::optional<int> port = read_int(environment, "MASTER_PORT");
  if (!address || address->empty() || !port)
    throw std::runtime_error("under " + identity.launcher +
                             ", set NCCL_COMM_ID=<host of rank 0>:<free port> (or MASTER_ADDR and MASTER_PORT) "
                             "so that the ranks can rendezvous");
  // torchrun's agent serves its TCP store on MASTER_PORT of MASTER_ADDR: NCCL's root could not listen there.
  const bool torchrun = identity.launcher == "torchrun";
  const int nccl_port = torchrun ? *port + 1 : *port;
  if (*port < 1 || nccl_port > 65535)
    throw std::runtime_error(fmt::format("MASTER_PORT={}: expected a port in [1, {}]", *port, torchrun ? 65534 : 65535));
  const std::string value = fmt::format("{}:{}", *address, nccl_port);
  decisions.push_back({"NCCL_COMM_ID", value, true,
                       fmt::format("NCCL_COMM_ID={} set (it was unset) from MASTER_ADDR and MASTER_PORT{}", value,
                                   torchrun ? " + 1 (torchrun's store holds MASTER_PORT)" : "")});
  return decisions;
}

EnvironmentDecision local_comm_id_decision(int free_port, const EnvironmentLookup& environment) {
  if (auto comm_id = environment("NCCL_COMM_ID"))
    return {"NCCL_COMM_ID", *comm_id, false,
            fmt::format("NCCL_COMM_ID={} kept as set in the environment for the local ranks", *comm_id)};
  const std::string value = fmt::format("127.0.0.1:{}", free_port);
  return {"NCCL_COMM_ID", value, true, fmt::format("NCCL_COMM_ID={} set for the local ranks (it was unset)", value)};
}

}  // namespace twin
