// The lock file is opened close-on-exec, so that the processes twin execs (twin-gpu, a rank per GPU) do not
// hold it after this process is gone. It is removed while still locked, and a run that locked a file no longer
// at the path locks the one there instead: two runs never hold two files of one folder.
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
#include <sys/stat.h>
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

// "pid 1234" of the holder. The file is empty for a moment after its holder created it (or holds a killed run's
// pid until the next holder writes its own): a pid of no running process is read again for up to a second.
std::string holder_of(int fd) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (const pid_t pid = running_pid_in(fd)) return "pid " + std::to_string(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "its pid not written";
}

// The file at a path, opened, and whether this run locked it; `error` is the errno of what failed.
struct LockAttempt {
  int fd = -1;  // open unless opening failed, whether locked or not
  bool locked = false;
  int error = 0;
};

// Opens and locks the file at `path`. A file another run removed when it let go (after this run opened it) is no
// lock: it is opened again, so that the lock held is always on the file at `path`.
LockAttempt open_and_lock(const std::filesystem::path& path) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return {-1, false, errno};
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) return {fd, false, errno};
    struct stat held {}, named {};
    if (fstat(fd, &held) == 0 && stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      return {fd, true, 0};
    ::close(fd);
  }
  return {-1, false, EAGAIN};
}

}  // namespace

FolderLock::FolderLock(const std::filesystem::path& folder) {
  const std::filesystem::path path = folder / kFileName;
  const LockAttempt attempt = open_and_lock(path);
  if (!attempt.locked) {
    const std::string holder = attempt.error == EWOULDBLOCK ? holder_of(attempt.fd) : std::string();
    if (attempt.fd >= 0) ::close(attempt.fd);
    if (attempt.error == EWOULDBLOCK)
      throw InputError(folder.string(), "",
                       fmt::format("in use by another twin run ({}); wait for it to end or choose another --out", holder));
    throw InputError(folder.string(), "",
                     fmt::format("a folder twin can write into and lock (--out): {}: {}", kFileName,
                                 std::strerror(attempt.error)));
  }
  fd_ = attempt.fd;
  path_ = path;
  // Should the write fail, the lock holds all the same; only a refused run's message lacks the pid.
  const std::string pid = std::to_string(getpid()) + "\n";
  [[maybe_unused]] const bool written =
      ftruncate(fd_, 0) == 0 && pwrite(fd_, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: a run that opened it meanwhile sees it gone and opens anew
  ::close(fd_);             // releases the lock
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : path_(std::exchange(other.path_, {})), fd_(std::exchange(other.fd_, -1)) {}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  std::swap(path_, other.path_);
  std::swap(fd_, other.fd_);
  return *this;
}

}  // namespace twin
