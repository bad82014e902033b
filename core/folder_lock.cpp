// The lock file is opened close-on-exec, so that the processes twin execs (twin-gpu, a rank per GPU) do not
// hold it after this process is gone. Its content is the holder's pid, written after the lock is taken: a run
// refused in the moment between may find it empty and says so.
#include "core/folder_lock.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace twin {

namespace {

// "pid 1234", from the lock file's content.
std::string holder_of(int fd) {
  char text[32] = {};
  const ssize_t read_bytes = pread(fd, text, sizeof text - 1, 0);
  std::string digits;
  for (ssize_t i = 0; i < read_bytes && text[i] >= '0' && text[i] <= '9'; ++i) digits += text[i];
  return digits.empty() ? std::string("its pid not written yet") : "pid " + digits;
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
