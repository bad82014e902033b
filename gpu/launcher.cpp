// fork + execv of /proc/self/exe; the parent only waits and forwards signals. A free port comes from
// binding port 0 and reading it back (closed again before the children start: a small race we accept).
#include "gpu/launcher.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <netinet/in.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace twin::gpu {
namespace {

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("launcher: cannot open a socket to find a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    throw std::runtime_error("launcher: cannot bind a local port");
  }
  const int port = ntohs(address.sin_port);
  close(fd);
  return port;
}

volatile std::sig_atomic_t g_forward_signal = 0;
void remember_signal(int signal) { g_forward_signal = signal; }

}  // namespace

std::optional<RankIdentity> rank_from_environment() { return twin::rank_from_environment(process_environment()); }

void prepare_nccl_environment(const RankIdentity& identity) {
  for (const EnvironmentDecision& decision : nccl_environment_decisions(identity, process_environment())) {
    if (decision.set_by_twin) setenv(decision.name.c_str(), decision.value.c_str(), 0);
    spdlog::info("{}", decision.message);
  }
}

std::vector<std::string> own_command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string current;
  for (char c : raw) {
    if (c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);
  return args;
}

int launch_local_ranks(int gpus) {
  const std::vector<std::string> args = own_command_line();
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The user's NCCL_COMM_ID (a port their firewall opens, say) is kept; otherwise a free local port.
  const EnvironmentDecision comm_id = local_comm_id_decision(free_local_port(), process_environment());
  spdlog::info("{}", comm_id.message);

  struct sigaction action{};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::vector<pid_t> children;
  for (int rank = 0; rank < gpus; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("launcher: fork failed");
    if (pid == 0) {
      setenv("TWIN_RANK", std::to_string(rank).c_str(), 1);
      setenv("TWIN_WORLD_SIZE", std::to_string(gpus).c_str(), 1);
      setenv("TWIN_LOCAL_RANK", std::to_string(rank).c_str(), 1);
      // NCCL_NVLS_ENABLE is each rank's prepare_nccl_environment's to decide, from the user's environment.
      setenv("NCCL_COMM_ID", comm_id.value.c_str(), 0);
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    children.push_back(pid);
  }

  int exit_code = 0;
  std::size_t running = children.size();
  bool terminated = false;
  while (running > 0) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, 0);
    if (done < 0) {
      if (errno == EINTR && g_forward_signal && !terminated) {
        spdlog::warn("interrupted: stopping the {} rank processes; no profile is written", running);
        for (pid_t child : children) kill(child, SIGTERM);
        terminated = true;
        exit_code = 128 + g_forward_signal;
      }
      continue;
    }
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !terminated) {
      spdlog::error("a rank process failed ({}); stopping the others",
                    WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                      : "signal " + std::to_string(WTERMSIG(status)));
      for (pid_t child : children)
        if (child != done) kill(child, SIGTERM);
      terminated = true;
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace twin::gpu
