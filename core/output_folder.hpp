// A command's outputs appear in their folder all together or not at all. They are written into a staging
// folder inside it (OUT/.twin-partial-<pid>); publish() then removes every output a previous run may have
// left there (all the names the command writes, not only this run's) and moves the new ones in. A run
// that fails, throws or is interrupted (SIGINT, SIGTERM) leaves the previous outputs untouched and no
// staging folder; one killed outright (SIGKILL) leaves a staging folder that the next run there removes.
// One run at a time writes into a folder: an OutputFolder holds its FolderLock (core/folder_lock.hpp) from
// construction to destruction, and a second run there is refused at once, naming the first one's pid.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/folder_lock.hpp"

namespace twin {

// Installs handlers for SIGINT and SIGTERM and a thread that, on either, removes every registered
// temporary (register_temporary) and exits with 128 + the signal. Processes forked from this one keep the
// default actions. Call once, first thing in main.
void install_interrupt_cleanup();

// Paths (files or folders) removed if the process is interrupted while they are registered.
void register_temporary(const std::filesystem::path& path);
void unregister_temporary(const std::filesystem::path& path);

class OutputFolder {
 public:
  // `out` must not be empty; it is created if missing. `output_names` are the files and folders the command
  // writes into it (e.g. "ranking.csv", "traces"). Throws InputError "OUT: in use by another twin run (pid N)
  // ..." while another process (or another OutputFolder of this one) holds the folder.
  OutputFolder(std::filesystem::path out, std::vector<std::string> output_names);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  const std::filesystem::path& out() const { return out_; }
  // Where to write the output `name` before publish().
  std::filesystem::path staged(const std::string& name) const { return staging_ / name; }
  // Replaces the folder's outputs with the staged ones; outputs not staged this run are removed. Should a move
  // fail, the previous outputs are put back and InputError is thrown.
  void publish();

 private:
  std::filesystem::path out_, staging_;
  std::vector<std::string> names_;
  FolderLock lock_;
  bool published_ = false;
};

}  // namespace twin
