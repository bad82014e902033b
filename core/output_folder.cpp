// Interrupts are taken by a thread of their own (sigwait), so the cleanup runs as ordinary code, not in a
// signal handler where removing a folder would not be safe. Stale staging folders are recognised by the
// pid in their name: one whose process no longer exists is removed.
#include "core/output_folder.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <pthread.h>
#include <unistd.h>

#include "core/error.hpp"

namespace twin {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kStagingPrefix = ".twin-partial-";

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::vector<fs::path>& registry() {
  static std::vector<fs::path> paths;
  return paths;
}

void remove_registered() {
  std::lock_guard lock(registry_mutex());
  for (const fs::path& path : registry()) {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  registry().clear();
}

// A staging folder left by a process that no longer runs (killed outright).
bool is_stale_staging(const fs::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  if (!name.starts_with(kStagingPrefix) || !entry.is_directory()) return false;
  const std::string digits = name.substr(kStagingPrefix.size());
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit) || digits.size() > 9) return false;
  const pid_t pid = static_cast<pid_t>(std::stol(digits));
  return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

void install_interrupt_cleanup() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) throw std::runtime_error("pthread_sigmask failed");
  std::thread([signals] {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) return;
    remove_registered();
    std::_Exit(128 + signal);
  }).detach();
}

void register_temporary(const fs::path& path) {
  std::lock_guard lock(registry_mutex());
  registry().push_back(path);
}

void unregister_temporary(const fs::path& path) {
  std::lock_guard lock(registry_mutex());
  std::erase(registry(), path);
}

OutputFolder::OutputFolder(fs::path out, std::vector<std::string> output_names)
    : out_(std::move(out)), names_(std::move(output_names)) {
  if (out_.empty()) throw InputError("--out", "", "a folder name (it is empty)");
  std::error_code error;
  fs::create_directories(out_, error);
  if (error || !fs::is_directory(out_))
    throw InputError(out_.string(), "", "a folder twin can create or write into (--out)");
  for (const fs::directory_entry& entry : fs::directory_iterator(out_, error))
    if (is_stale_staging(entry)) fs::remove_all(entry.path(), error);
  staging_ = out_ / (std::string(kStagingPrefix) + std::to_string(getpid()));
  fs::remove_all(staging_, error);
  register_temporary(staging_);
  if (!fs::create_directory(staging_, error) || error) {
    unregister_temporary(staging_);
    throw InputError(out_.string(), "", "a folder twin can write into (--out): " + error.message());
  }
}

OutputFolder::~OutputFolder() {
  if (published_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
  unregister_temporary(staging_);
}

void OutputFolder::publish() {
  for (const std::string& name : names_) {
    const fs::path target = out_ / name;
    fs::remove_all(target);
    if (fs::exists(staged(name))) fs::rename(staged(name), target);
  }
  fs::remove_all(staging_);
  unregister_temporary(staging_);
  published_ = true;
}

}  // namespace twin
