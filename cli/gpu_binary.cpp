// The folder of /proc/self/exe, not argv[0]: twin may be started through PATH or a symbolic link.
#include "cli/gpu_binary.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

namespace twin {
namespace {

std::vector<char*> saved_arguments;

}  // namespace

void remember_command_line(int argc, char** argv) { saved_arguments.assign(argv, argv + argc); }

int run_gpu_binary() {
#ifdef TWIN_GPU_BINARY
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path gpu_binary = (error ? std::filesystem::path(".") : self.parent_path()) / TWIN_GPU_BINARY;
  std::vector<char*> arguments = saved_arguments;
  const std::string program = gpu_binary.string();
  if (arguments.empty()) arguments.push_back(const_cast<char*>(program.c_str()));
  arguments.push_back(nullptr);
  execv(program.c_str(), arguments.data());
  spdlog::error("this command runs in {} (twin's GPU half, built with it from the CUDA toolkit), which could not be "
                "started: {}", program, std::strerror(errno));
#else
  spdlog::error("this command needs the GPU parts, and this twin was built without the CUDA toolkit "
                "(TWIN_WITH_CUDA off)");
#endif
  return 1;
}

}  // namespace twin
