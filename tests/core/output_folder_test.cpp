// A command's outputs appear all together or not at all (core/output_folder.hpp).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/output_folder.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

struct Folder {
  fs::path path = fs::temp_directory_path() / ("twin-output-folder-" + std::to_string(::getpid()));
  Folder() { fs::remove_all(path); }
  ~Folder() { fs::remove_all(path); }
};

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(OutputFolder, PublishReplacesEveryOutputOfThePreviousRun) {
  Folder out;
  {
    OutputFolder first(out.path, {"ranking.csv", "best.json", "traces"});
    write_file_atomically(first.staged("ranking.csv"), "old ranking");
    write_file_atomically(first.staged("best.json"), "old plan");
    fs::create_directories(first.staged("traces"));
    write_file_atomically(first.staged("traces") / "top1.json", "old trace");
    first.publish();
  }
  std::ofstream(out.path / "notes.txt") << "the user's";
  {
    OutputFolder second(out.path, {"ranking.csv", "best.json", "traces"});
    write_file_atomically(second.staged("ranking.csv"), "new ranking");  // nothing feasible: no plan, no traces
    second.publish();
  }
  EXPECT_EQ(text_of(out.path / "ranking.csv"), "new ranking");
  EXPECT_FALSE(fs::exists(out.path / "best.json"));  // `twin execute --best` must not run the old plan
  EXPECT_FALSE(fs::exists(out.path / "traces"));
  EXPECT_EQ(text_of(out.path / "notes.txt"), "the user's");
  for (const auto& entry : fs::directory_iterator(out.path))
    EXPECT_FALSE(entry.path().filename().string().starts_with(".twin-partial")) << entry.path();
}

TEST(OutputFolder, AFailedRunLeavesThePreviousOutputsAndNoStaging) {
  Folder out;
  {
    OutputFolder first(out.path, {"ranking.csv"});
    write_file_atomically(first.staged("ranking.csv"), "old ranking");
    first.publish();
  }
  try {
    OutputFolder second(out.path, {"ranking.csv"});
    write_file_atomically(second.staged("ranking.csv"), "half");
    throw std::runtime_error("the search failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(text_of(out.path / "ranking.csv"), "old ranking");
  std::set<std::string> names;  // the lock file goes with the run that held it
  for (const auto& entry : fs::directory_iterator(out.path)) names.insert(entry.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"ranking.csv"}));
}

// A move that fails half-way (here: setting best.json aside, after ranking.csv) is undone.
TEST(OutputFolder, APublishThatFailsLeavesThePreviousOutputsAndSaysSo) {
  Folder out;
  {
    OutputFolder first(out.path, {"ranking.csv", "best.json"});
    write_file_atomically(first.staged("ranking.csv"), "old ranking");
    write_file_atomically(first.staged("best.json"), "old plan");
    first.publish();
  }
  OutputFolder second(out.path, {"ranking.csv", "best.json"});
  write_file_atomically(second.staged("ranking.csv"), "new ranking");
  write_file_atomically(second.staged("best.json"), "new plan");
  // Where publish sets the old best.json aside, a non-empty folder already: that rename fails.
  fs::create_directories(second.staged(".previous") / "best.json");
  write_file_atomically(second.staged(".previous") / "best.json" / "x", "in the way");
  try {
    second.publish();
    ADD_FAILURE() << "published although the old best.json could not be set aside";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("the previous outputs are left as they were"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(text_of(out.path / "ranking.csv"), "old ranking");
  EXPECT_EQ(text_of(out.path / "best.json"), "old plan");
}

TEST(OutputFolder, OneRunAtATimeAndTheSecondIsToldWhichHoldsIt) {
  Folder out;
  std::optional<OutputFolder> first(std::in_place, out.path, std::vector<std::string>{"ranking.csv"});
  try {
    OutputFolder second(out.path, {"ranking.csv"});
    ADD_FAILURE() << "a second OutputFolder of a held folder was made";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("in use by another twin run (pid " + std::to_string(getpid()) + ")"),
              std::string::npos) << error.what();
  }
  first.reset();  // released: the next run may write
  EXPECT_NO_THROW(OutputFolder(out.path, {"ranking.csv"}));
}

// Two processes: the lock is the kernel's, so it holds across them and is gone with its holder.
TEST(OutputFolder, AnotherProcessHoldingTheFolderIsNamedAndItsEndReleasesIt) {
  Folder out;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    OutputFolder held(out.path, {"ranking.csv"});
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = write(ready[1], &byte, 1);
    pause();  // until killed: SIGKILL, so that nothing but the kernel releases the lock
    _exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  try {
    OutputFolder second(out.path, {"ranking.csv"});
    ADD_FAILURE() << "the folder another process holds was taken";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("in use by another twin run (pid " + std::to_string(holder) + ")"),
              std::string::npos) << error.what();
  }
  kill(holder, SIGKILL);
  int status = 0;
  waitpid(holder, &status, 0);
  EXPECT_NO_THROW(OutputFolder(out.path, {"ranking.csv"}));
  close(ready[0]);
  close(ready[1]);
}

TEST(OutputFolder, RemovesTheStagingOfAKilledRun) {
  Folder out;
  fs::create_directories(out.path / ".twin-partial-999999999");  // no such process
  std::ofstream(out.path / ".twin-partial-999999999" / "traces.json.tmp") << "20 MiB once";
  OutputFolder folder(out.path, {"ranking.csv"});
  EXPECT_FALSE(fs::exists(out.path / ".twin-partial-999999999"));
}

TEST(OutputFolder, AnEmptyNameIsRefused) {
  EXPECT_THROW(OutputFolder(fs::path(), {"ranking.csv"}), InputError);
}

// A rank forked by twin's launcher must still die of the SIGTERM that ends its siblings (a blocked signal
// once left three of them running after a fault), and twin itself must remove what it was writing.
TEST(InterruptCleanup, ForkedChildrenKeepTheDefaultActionsAndTwinCleansUp) {
  Folder out;
  fs::create_directories(out.path);
  const pid_t twin = fork();
  ASSERT_GE(twin, 0);
  if (twin == 0) {  // stands for the twin process
    install_interrupt_cleanup();
    const pid_t rank = fork();
    if (rank == 0) {
      pause();
      _exit(3);  // reached only if SIGTERM did not end it
    }
    kill(rank, SIGTERM);
    int status = 0;
    waitpid(rank, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) _exit(4);
    register_temporary(out.path / "half-written");
    std::ofstream(out.path / "half-written") << "x";
    raise(SIGTERM);  // twin's own: the cleanup thread removes the file and exits 128 + 15
    pause();
    _exit(5);
  }
  int status = 0;
  waitpid(twin, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_FALSE(fs::exists(out.path / "half-written"));
}

}  // namespace
}  // namespace twin
