#include "runtime/process/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace baton::runtime {
namespace {

constexpr char kLockFile[] = "launcher.lock";

// The pid a live holder wrote into the lock file, or "unknown".
std::string HolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  int pid = 0;
  if (n > 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buffer, n)), &pid)) {
    return std::to_string(pid);
  }
  return "unknown";
}

}  // namespace

absl::StatusOr<RunDirectory> RunDirectory::Acquire(absl::string_view name) {
  if (name.empty() || name.find('/') != absl::string_view::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("run directory name \"", name, "\" is not a file name"));
  }
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / absl::StrCat("baton-", geteuid(), "-", name);
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path.string()));
  }
  // Whatever is there must be this user's private directory: another user could have made it (or a
  // symlink to elsewhere) in a shared /tmp.
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path.string()));
  if (!S_ISDIR(info.st_mode) || info.st_uid != geteuid() || (info.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path.string(), " is not a directory of this user's that only it can enter; remove it"));
  }
  const std::filesystem::path lock_path = path / kLockFile;
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", lock_path.string()));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = HolderPid(fd);
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::AlreadyExistsError(absl::StrCat("another baton serve (pid ", holder,
                                                   ") runs this deployment (", path.string(), ")"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("cannot lock ", lock_path.string()));
  }
  // The lock is free: whatever else is here was left by a launcher that died.
  int num_stale = 0;
  std::error_code ec;
  for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.path().filename() == kLockFile) continue;
    std::filesystem::remove_all(entry.path(), ec);
    ++num_stale;
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot write ", lock_path.string()));
  }
  return RunDirectory(path, fd, num_stale);
}

RunDirectory::RunDirectory(RunDirectory&& other) noexcept
    : path_(std::move(other.path_)), lock_fd_(other.lock_fd_), num_stale_removed_(other.num_stale_removed_) {
  other.path_.clear();
  other.lock_fd_ = -1;
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ < 0) return;
  // Removed while still locked, so that no other launcher empties it under this one.
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  close(lock_fd_);
}

}  // namespace baton::runtime
