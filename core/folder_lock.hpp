// One twin run at a time in a folder: an exclusive flock on FOLDER/.twin-lock, held while the FolderLock lives.
// The kernel releases it however the process ends (an exit, a signal, SIGKILL), so no run ever finds a folder
// locked by one that is gone. The holder writes its pid into the file, so that a refused run can name it, and
// removes the file when it lets go: a finished run's folder holds its outputs only (the same bytes every run).
#pragma once
#include <filesystem>

namespace twin {

class FolderLock {
 public:
  FolderLock() = default;  // holds nothing
  // Locks `folder`, which must exist. Throws InputError "FOLDER: in use by another twin run (pid N) ..." when
  // another process (or another FolderLock of this one) holds it, and names the cause when the lock file
  // cannot be created.
  explicit FolderLock(const std::filesystem::path& folder);
  ~FolderLock();
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  static constexpr const char* kFileName = ".twin-lock";
  // The lock file while held (empty when nothing is held).
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace twin
