// RunDirectory: where one deployment's launcher keeps its files while it runs (the effective config,
// a generated deployment secret), named after the deployment so that the next start finds what a
// killed launcher left behind.
//
// The directory is <temp dir>/baton-<uid>-<name>, mode 0700, owned by this user (anything else
// found at that path is refused, not followed). A lock file inside it is held with flock(2) for the
// launcher's life: the kernel drops the lock when the process dies however it dies, so a directory
// whose lock is free belongs to nobody, and Acquire empties it before use. A lock held by a live
// launcher is an error naming its pid. Destruction removes the directory.
#pragma once

#include <filesystem>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace baton::runtime {

class RunDirectory {
 public:
  // `name`: the deployment's name, e.g. "serve-127.0.0.1-50051" (a path component: no '/').
  // AlreadyExists when a live launcher holds it; FailedPrecondition when the path is not a directory
  // of this user's that only it can enter; InvalidArgument for a bad name.
  static absl::StatusOr<RunDirectory> Acquire(absl::string_view name);

  RunDirectory(RunDirectory&& other) noexcept;
  RunDirectory& operator=(RunDirectory&&) = delete;
  ~RunDirectory();

  const std::filesystem::path& path() const { return path_; }
  // How many entries a dead launcher had left, removed by Acquire.
  int num_stale_removed() const { return num_stale_removed_; }

 private:
  RunDirectory(std::filesystem::path path, int lock_fd, int num_stale_removed)
      : path_(std::move(path)), lock_fd_(lock_fd), num_stale_removed_(num_stale_removed) {}

  std::filesystem::path path_;
  int lock_fd_ = -1;
  int num_stale_removed_ = 0;
};

}  // namespace baton::runtime
