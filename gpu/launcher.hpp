// One process per GPU. `launch_local_ranks` re-executes this program once per local GPU with TWIN_RANK,
// TWIN_WORLD_SIZE, TWIN_LOCAL_RANK and NCCL_COMM_ID (the user's, else 127.0.0.1:<free port>) in its
// environment, so the ranks rendezvous through NCCL alone. Under torchrun, mpirun or srun the launcher's
// own variables name the rank (core/launch_environment.hpp decides; this file applies).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/launch_environment.hpp"

namespace twin::gpu {

using twin::RankIdentity;

// The rank this process is, from TWIN_*, torchrun's RANK/WORLD_SIZE/LOCAL_RANK, OMPI_COMM_WORLD_* or SLURM_*
// variables; nullopt when none is set. Throws std::runtime_error on a malformed value.
std::optional<RankIdentity> rank_from_environment();

// Applies nccl_environment_decisions to this process, logging each one (spdlog::info): NCCL_NVLS_ENABLE=0
// only where unset, NCCL_COMM_ID from MASTER_ADDR/MASTER_PORT only where unset; a value the user set is kept.
// Throws when a multi-rank launch has no rendezvous address.
void prepare_nccl_environment(const RankIdentity& identity);

// Starts `gpus` copies of this program (same arguments), waits for all, returns the exit code: 0 when
// all succeeded; on a failure, the others are terminated. SIGINT/SIGTERM are forwarded to the children.
int launch_local_ranks(int gpus);

// This process's argv, read from /proc/self/cmdline.
std::vector<std::string> own_command_line();

}  // namespace twin::gpu
