// One process per GPU. `launch_local_ranks` re-executes this program once per local GPU with TWIN_RANK,
// TWIN_WORLD_SIZE, TWIN_LOCAL_RANK and NCCL_COMM_ID=127.0.0.1:<free port> in its environment, so the
// ranks rendezvous through NCCL alone. Under mpirun or srun the launcher's own variables name the rank.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace twin::gpu {

struct RankIdentity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string launcher;  // "twin", "mpirun" or "srun"
};

// The rank this process is, from TWIN_*, OMPI_COMM_WORLD_* or SLURM_* variables; nullopt when none is set.
std::optional<RankIdentity> rank_from_environment();

// Sets NCCL_NVLS_ENABLE=0 in this process (the device machines require NVLink multicast off) and, for
// mpirun/srun, maps MASTER_ADDR/MASTER_PORT onto NCCL_COMM_ID when that is unset. Throws when a
// multi-rank launch has no rendezvous address.
void prepare_nccl_environment(const RankIdentity& identity);

// Starts `gpus` copies of this program (same arguments), waits for all, returns the exit code: 0 when
// all succeeded; on a failure, the others are terminated. SIGINT/SIGTERM are forwarded to the children.
int launch_local_ranks(int gpus);

// This process's argv, read from /proc/self/cmdline.
std::vector<std::string> own_command_line();

}  // namespace twin::gpu
