// The launcher's decisions from the environment: the rank under twin, torchrun, mpirun and srun, and NCCL
// variables set only where the user left them unset.
#include "core/launch_environment.hpp"

#include <gtest/gtest.h>

#include <map>

namespace twin {
namespace {

EnvironmentLookup environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
}

void expect_identity(const std::optional<RankIdentity>& identity, int rank, int world, int local,
                     const std::string& launcher) {
  ASSERT_TRUE(identity.has_value());
  EXPECT_EQ(identity->rank, rank);
  EXPECT_EQ(identity->world_size, world);
  EXPECT_EQ(identity->local_rank, local);
  EXPECT_EQ(identity->launcher, launcher);
}

TEST(LaunchEnvironment, NoLauncherMeansNoRank) {
  EXPECT_FALSE(rank_from_environment(environment({})).has_value());
  // RANK alone (a common name) is not torchrun.
  EXPECT_FALSE(rank_from_environment(environment({{"RANK", "3"}})).has_value());
}

TEST(LaunchEnvironment, EachLaunchersVariables) {
  expect_identity(rank_from_environment(environment({{"RANK", "9"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "1"}})), 9,
                  16, 1, "torchrun");
  expect_identity(rank_from_environment(environment(
                      {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "5"}})),
                  5, 8, 5, "mpirun");
  expect_identity(
      rank_from_environment(environment({{"SLURM_PROCID", "12"}, {"SLURM_NTASKS", "32"}, {"SLURM_LOCALID", "4"}})), 12,
      32, 4, "srun");
  expect_identity(
      rank_from_environment(environment({{"TWIN_RANK", "2"}, {"TWIN_WORLD_SIZE", "4"}, {"TWIN_LOCAL_RANK", "2"}})), 2,
      4, 2, "twin");
}

// `srun torchrun ...` or torchrun in an sbatch script: SLURM_PROCID is the task's, RANK the worker's.
TEST(LaunchEnvironment, TorchrunInsideSlurmTakesTorchrunsRank) {
  expect_identity(rank_from_environment(environment({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                                     {"SLURM_LOCALID", "0"}, {"RANK", "11"}, {"WORLD_SIZE", "16"},
                                                     {"LOCAL_RANK", "3"}})),
                  11, 16, 3, "torchrun");
}

TEST(LaunchEnvironment, MalformedOrInconsistentValuesAreNamed) {
  auto message = [](std::map<std::string, std::string> variables) {
    try {
      rank_from_environment(environment(std::move(variables)));
    } catch (const std::runtime_error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{"RANK", "2x"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}}),
            "environment variable RANK=\"2x\": expected an integer");
  EXPECT_EQ(message({{"RANK", "1"}, {"WORLD_SIZE", "4"}}),
            "environment variable LOCAL_RANK is unset; expected it beside RANK (set by torchrun)");
  EXPECT_EQ(message({{"OMPI_COMM_WORLD_RANK", "8"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}),
            "OMPI_COMM_WORLD_RANK=8: expected a rank in [0, 8) (OMPI_COMM_WORLD_SIZE=8)");
  EXPECT_EQ(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}, {"SLURM_LOCALID", "0"}}),
            "SLURM_NTASKS=0: expected a world size of at least 1");
  EXPECT_EQ(message({{"TWIN_RANK", ""}}), "environment variable TWIN_RANK=\"\": expected an integer");
}

const EnvironmentDecision* find(const std::vector<EnvironmentDecision>& decisions, const std::string& name) {
  for (const EnvironmentDecision& d : decisions)
    if (d.name == name) return &d;
  return nullptr;
}

TEST(LaunchEnvironment, NvlsOffOnlyWhereUnsetAndSaid) {
  const RankIdentity single{0, 1, 0, "twin"};
  auto unset = nccl_environment_decisions(single, environment({}));
  ASSERT_EQ(unset.size(), 1u);
  EXPECT_EQ(unset[0].name, "NCCL_NVLS_ENABLE");
  EXPECT_EQ(unset[0].value, "0");
  EXPECT_TRUE(unset[0].set_by_twin);
  EXPECT_NE(unset[0].message.find("NCCL_NVLS_ENABLE=0 set (it was unset)"), std::string::npos) << unset[0].message;

  auto user = nccl_environment_decisions(single, environment({{"NCCL_NVLS_ENABLE", "1"}}));
  ASSERT_EQ(user.size(), 1u);
  EXPECT_EQ(user[0].value, "1");
  EXPECT_FALSE(user[0].set_by_twin);
  EXPECT_EQ(user[0].message, "NCCL_NVLS_ENABLE=1 kept as set in the environment");
}

TEST(LaunchEnvironment, RendezvousFromMasterAddressOnlyWhereNcclCommIdIsUnset) {
  const RankIdentity mpi{3, 8, 3, "mpirun"};
  auto from_master =
      nccl_environment_decisions(mpi, environment({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}}));
  const EnvironmentDecision* comm = find(from_master, "NCCL_COMM_ID");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->value, "node0:29500");
  EXPECT_TRUE(comm->set_by_twin);

  // torchrun's agent keeps its TCP store on MASTER_PORT: NCCL's root listens on the next port.
  const RankIdentity torchrun{3, 8, 3, "torchrun"};
  comm = find(nccl_environment_decisions(torchrun, environment({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}})),
              "NCCL_COMM_ID");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->value, "node0:29501");
  EXPECT_NE(comm->message.find("torchrun's store holds MASTER_PORT"), std::string::npos) << comm->message;

  auto user = nccl_environment_decisions(
      torchrun, environment({{"NCCL_COMM_ID", "10.0.0.1:7000"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}}));
  comm = find(user, "NCCL_COMM_ID");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->value, "10.0.0.1:7000");
  EXPECT_FALSE(comm->set_by_twin);

  EXPECT_THROW(nccl_environment_decisions(mpi, environment({{"MASTER_ADDR", "node0"}})), std::runtime_error);
  EXPECT_THROW(nccl_environment_decisions(torchrun, environment({{"MASTER_ADDR", "n"}, {"MASTER_PORT", "65535"}})),
               std::runtime_error);
  // One rank needs no rendezvous.
  EXPECT_EQ(find(nccl_environment_decisions(RankIdentity{0, 1, 0, "mpirun"}, environment({})), "NCCL_COMM_ID"),
            nullptr);
}

TEST(LaunchEnvironment, LocalLauncherKeepsTheUsersCommId) {
  EnvironmentDecision chosen = local_comm_id_decision(41234, environment({}));
  EXPECT_EQ(chosen.value, "127.0.0.1:41234");
  EXPECT_TRUE(chosen.set_by_twin);
  EnvironmentDecision kept = local_comm_id_decision(41234, environment({{"NCCL_COMM_ID", "127.0.0.1:6000"}}));
  EXPECT_EQ(kept.value, "127.0.0.1:6000");
  EXPECT_FALSE(kept.set_by_twin);
  // Its ranks do not report it again.
  EXPECT_EQ(find(nccl_environment_decisions(RankIdentity{1, 4, 1, "twin"}, environment({{"NCCL_COMM_ID", kept.value}})),
                 "NCCL_COMM_ID"),
            nullptr);
}

}  // namespace
}  // namespace twin
