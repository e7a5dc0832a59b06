#include "runtime/process/run_directory.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

std::string UniqueName(const char* what) { return absl::StrCat("run-dir-test-", what, "-", getpid()); }

TEST(RunDirectoryTest, IsPrivateAndGoesWithItsObject) {
  std::filesystem::path path;
  {
    absl::StatusOr<RunDirectory> dir = RunDirectory::Acquire(UniqueName("private"));
    ASSERT_TRUE(dir.ok()) << dir.status();
    path = dir->path();
    EXPECT_EQ(path.filename().string(), absl::StrCat("baton-", geteuid(), "-", UniqueName("private")));
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700);
    EXPECT_EQ(dir->num_stale_removed(), 0);
    std::ofstream(path / "config.yaml") << "x";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(RunDirectoryTest, ALiveHolderIsAnErrorNamingItsPid) {
  absl::StatusOr<RunDirectory> first = RunDirectory::Acquire(UniqueName("held"));
  ASSERT_TRUE(first.ok()) << first.status();
  // flock conflicts between two opens even in one process.
  absl::StatusOr<RunDirectory> second = RunDirectory::Acquire(UniqueName("held"));
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_NE(second.status().message().find(absl::StrCat("pid ", getpid())), std::string::npos)
      << second.status();
}

TEST(RunDirectoryTest, WhatADeadHolderLeftIsRemovedByTheNextAcquire) {
  const std::string name = UniqueName("stale");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<RunDirectory> dir = RunDirectory::Acquire(name);
    if (!dir.ok()) std::_Exit(1);
    std::ofstream(dir->path() / "config.yaml") << "left behind";
    std::filesystem::create_directory(dir->path() / "secret-dir");
    std::_Exit(0);  // as a SIGKILL would: no destructor, the kernel drops the lock
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  absl::StatusOr<RunDirectory> dir = RunDirectory::Acquire(name);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->num_stale_removed(), 2);
  EXPECT_FALSE(std::filesystem::exists(dir->path() / "config.yaml"));
  EXPECT_FALSE(std::filesystem::exists(dir->path() / "secret-dir"));
}

TEST(RunDirectoryTest, RefusesAPathThatIsNotThisUsersPrivateDirectory) {
  const std::string open_name = UniqueName("open");
  const std::filesystem::path open_dir =
      std::filesystem::temp_directory_path() / absl::StrCat("baton-", geteuid(), "-", open_name);
  ASSERT_EQ(mkdir(open_dir.c_str(), 0755), 0);
  chmod(open_dir.c_str(), 0755);  // whatever the umask
  EXPECT_TRUE(absl::IsFailedPrecondition(RunDirectory::Acquire(open_name).status()));
  std::filesystem::remove(open_dir);

  const std::string link_name = UniqueName("link");
  const std::filesystem::path link =
      std::filesystem::temp_directory_path() / absl::StrCat("baton-", geteuid(), "-", link_name);
  std::filesystem::create_directory_symlink("/", link);
  EXPECT_TRUE(absl::IsFailedPrecondition(RunDirectory::Acquire(link_name).status()));
  std::filesystem::remove(link);

  for (const char* bad : {"", "a/b", "..", "."}) {
    EXPECT_TRUE(absl::IsInvalidArgument(RunDirectory::Acquire(bad).status())) << bad;
  }
}

}  // namespace
}  // namespace baton::runtime
