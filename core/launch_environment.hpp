// Which rank this process is, and which NCCL variables the launcher sets, decided from the environment as
// plain functions (the GPU launcher, gpu/launcher.cpp, applies them; CPU tests check them).
// Launchers understood: twin's own (TWIN_RANK, TWIN_WORLD_SIZE, TWIN_LOCAL_RANK), torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK), mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK) and srun (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID). The user's NCCL settings are never changed: a variable is set only where
// it is unset, and each decision is one log line.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace twin {

// Reads one environment variable: std::getenv in the program, a map in tests. nullopt: unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvironmentLookup process_environment();

struct RankIdentity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string launcher;  // "twin", "torchrun", "mpirun" or "srun"
};

// The rank this process is; nullopt when no launcher's variables are set. Checked in the order twin,
// torchrun, mpirun, srun: torchrun started by srun or inside an sbatch script sees SLURM_PROCID too, and
// its own RANK is the worker's. torchrun counts when RANK and WORLD_SIZE are both set (LOCAL_RANK then
// required). Throws std::runtime_error naming the variable when a value is not an integer, or when
// rank >= world size, world size < 1 or a rank is negative.
std::optional<RankIdentity> rank_from_environment(const EnvironmentLookup& environment);

// One variable the launcher sets, or leaves as the user set it.
struct EnvironmentDecision {
  std::string name;
  std::string value;     // what the process will see
  bool set_by_twin = false;  // false: the user's value, kept
  std::string message;   // one line for the log, saying which and why
};

// What a rank sets before NCCL starts: NCCL_NVLS_ENABLE=0 where unset (NVLink multicast off: the device
// machines this was built on require it, and twin's collective tables are measured without it); for a
// multi-rank launch without NCCL_COMM_ID, NCCL_COMM_ID from MASTER_ADDR and MASTER_PORT (torchrun:
// MASTER_PORT + 1, since torchrun's agent keeps its TCP store on MASTER_PORT). Throws std::runtime_error
// when a multi-rank launch has no rendezvous address.
std::vector<EnvironmentDecision> nccl_environment_decisions(const RankIdentity& identity,
                                                            const EnvironmentLookup& environment);

// The local launcher's rendezvous for the ranks it starts: the user's NCCL_COMM_ID where set, else
// 127.0.0.1:`free_port`.
EnvironmentDecision local_comm_id_decision(int free_port, const EnvironmentLookup& environment);

}  // namespace twin
