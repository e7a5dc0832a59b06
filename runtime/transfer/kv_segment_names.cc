#include "runtime/transfer/kv_segment_names.h"

#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace baton::runtime {
namespace {

constexpr absl::string_view kPrefix = "baton-kv-";
constexpr const char* kShmDir = "/dev/shm";

// Calls fn(entry_name, pid) for every /dev/shm entry "baton-kv-<pid>-<index>"; unlinks it when fn
// returns true. Returns the number unlinked.
absl::StatusOr<int> UnlinkMatching(const std::function<bool(int64_t pid)>& fn) {
  DIR* dir = opendir(kShmDir);
  if (dir == nullptr) {
    if (errno == ENOENT) return 0;
    return absl::InternalError(absl::StrCat("cannot list ", kShmDir, ": ", std::strerror(errno)));
  }
  int num_removed = 0;
  while (const dirent* entry = readdir(dir)) {
    absl::string_view name(entry->d_name);
    if (!absl::StartsWith(name, kPrefix)) continue;
    name.remove_prefix(kPrefix.size());
    const size_t dash = name.find('-');
    int64_t pid = 0;
    int index = 0;
    if (dash == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dash), &pid) ||
        !absl::SimpleAtoi(name.substr(dash + 1), &index)) {
      continue;
    }
    if (!fn(pid)) continue;
    if (shm_unlink(absl::StrCat("/", entry->d_name).c_str()) == 0) ++num_removed;
  }
  closedir(dir);
  return num_removed;
}

}  // namespace

std::string KvSegmentName(int64_t pid, int index) {
  return absl::StrCat("/", kPrefix, pid, "-", index);
}

std::string NewKvSegmentName() {
  static std::atomic<int> next_index{0};
  return KvSegmentName(getpid(), next_index.fetch_add(1));
}

absl::StatusOr<int> RemoveStaleKvSegments(int64_t pid) {
  return UnlinkMatching([pid](int64_t owner) { return owner == pid; });
}

absl::StatusOr<int> RemoveOrphanedKvSegments() {
  return UnlinkMatching([](int64_t owner) {
    return owner > 0 && kill(static_cast<pid_t>(owner), 0) != 0 && errno == ESRCH;
  });
}

}  // namespace baton::runtime
