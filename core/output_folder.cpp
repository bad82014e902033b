// Interrupts: the handler only writes the signal's number into a pipe (async-signal-safe); a thread of
// its own reads it and removes the temporaries as ordinary code, then exits. No signal is blocked, so the
// processes twin forks (a rank per GPU) and execs inherit plain SIGINT/SIGTERM: in a forked child the
// handler sees another pid, restores the default action and re-raises. Stale staging folders are
// recognised by the pid in their name: one whose process no longer exists is removed.
#include "core/output_folder.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

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

namespace {

pid_t interrupt_owner = 0;           // the process whose temporaries the cleanup thread removes
int interrupt_pipe[2] = {-1, -1};

extern "C" void on_interrupt(int signal) {
  if (getpid() != interrupt_owner) {  // a forked child: behave as if twin had installed nothing
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  const unsigned char number = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t written = write(interrupt_pipe[1], &number, 1);
}

}  // namespace

void install_interrupt_cleanup() {
  if (interrupt_owner != 0) return;
  if (pipe(interrupt_pipe) != 0) throw std::runtime_error("pipe() failed");
  interrupt_owner = getpid();
  std::thread([] {
    unsigned char number = 0;
    while (read(interrupt_pipe[0], &number, 1) != 1)
      if (errno != EINTR) return;
    remove_registered();
    std::_Exit(128 + number);
  }).detach();
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGINT, SIGTERM})
    if (sigaction(signal, &action, nullptr) != 0) throw std::runtime_error("sigaction failed");
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
  lock_ = FolderLock(out_);  // before anything in the folder is touched
  for (const fs::directory_entry& entry : fs::directory_iterator(out_, error))
    if (is_stale_staging(entry)) fs::remove_all(entry.path(), error);
  staging_ = out_ / (std::string(kStagingPrefix) + std::to_string(getpid()));
  fs::remove_all(staging_, error);
  register_temporary(staging_);
  if (!fs::create_directory(staging_, error) || error) {
    unregister_temporary(staging_);
    throw InputError(out_.string(), "", "a folder twin can write into (--out): " + error.message());
  }
  register_temporary(lock_.path());  // an interrupted run leaves no lock file either
}

OutputFolder::~OutputFolder() {
  unregister_temporary(lock_.path());  // lock_ removes it as it lets go
  if (published_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
  unregister_temporary(staging_);
}

// The previous outputs are moved aside into the staging folder before the new ones move in, so that a move
// that fails can put them back: the folder holds one run's outputs or the other's, never a mix.
void OutputFolder::publish() {
  const fs::path previous = staging_ / ".previous";
  std::vector<std::string> set_aside, moved_in;
  try {
    fs::create_directory(previous);
    for (const std::string& name : names_)
      if (fs::exists(fs::symlink_status(out_ / name))) {
        fs::rename(out_ / name, previous / name);
        set_aside.push_back(name);
      }
    for (const std::string& name : names_)
      if (fs::exists(staged(name))) {
        fs::rename(staged(name), out_ / name);
        moved_in.push_back(name);
      }
  } catch (const fs::filesystem_error& failure) {
    std::error_code ignored;
    for (const std::string& name : moved_in) fs::remove_all(out_ / name, ignored);
    for (const std::string& name : set_aside) fs::rename(previous / name, out_ / name, ignored);
    throw InputError(out_.string(), "",
                     "a folder whose outputs twin can replace (--out): " + failure.code().message() +
                         "; the previous outputs are left as they were");
  }
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
  unregister_temporary(staging_);
  published_ = true;
}

}  // namespace twin
