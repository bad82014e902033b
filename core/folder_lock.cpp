// The lock file is opened close-on-exec, so that the processes twin execs (twin-gpu, a rank per GPU) do not
// hold it after this process is gone. Its content is the holder's pid, written after the lock is taken: a run
// refused in the moment between reads it again until it names a running process.
#include "core/folder_lock.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace twin {

namespace {

// The pid in the lock file, if it names a running process (0 otherwise).
pid_t running_pid_in(int fd) {
  char text[32] = {};
  const ssize_t read_bytes = pread(fd, text, sizeof text - 1, 0);
  long pid = 0;
  for (ssize_t i = 0; i < read_bytes && text[i] >= '0' && text[i] <= '9' && pid < 1'000'000'000; ++i)
    pid = pid * 10 + (text[i] - '0');
  return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) ? static_cast<pid_t>(pid) : 0;
}

// "pid 1234" of the holder. The file keeps the last holder's pid until the new one writes its own, moments after
// taking the lock: a pid of no running process is read again for up to a second.
std::string holder_of(int fd) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (const pid_t pid = running_pid_in(fd)) return "pid " + std::to_string(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "its pid not written";
}

}  // namespace

FolderLock::FolderLock(const std::filesystem::path& folder) {
  const std::filesystem::path path = folder / kFileName;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InputError(folder.string(), "",
                     fmt::format("a folder twin can write into (--out): cannot create {}: {}", kFileName,
                                 std::strerror(errno)));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? holder_of(fd_) : std::string();
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK)
      throw InputError(folder.string(), "", fmt::format("a folder twin can lock (--out): {}", std::strerror(error)));
    throw InputError(folder.string(), "",
                     fmt::format("in use by another twin run ({}); wait for it to end or choose another --out", holder));
  }
  // Should the write fail, the lock holds all the same; only a refused run's message lacks the pid.
  const std::string pid = std::to_string(getpid()) + "\n";
  [[maybe_unused]] const bool written =
      ftruncate(fd_, 0) == 0 && pwrite(fd_, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

FolderLock::FolderLock(FolderLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  std::swap(fd_, other.fd_);
  return *this;
}

}  // namespace twin
