#include "runtime/process/deployment_secret.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::runtime {
namespace {

constexpr size_t kMinSecretChars = 32;

absl::Status CheckValue(std::string_view value) {
  if (value.size() < kMinSecretChars) {
    return absl::InvalidArgumentError(
        absl::StrCat("a deployment secret has at least ", kMinSecretChars, " characters, not ", value.size()));
  }
  for (char c : value) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError("a deployment secret is printable ASCII without spaces");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> SecureRandomBytes(size_t num_bytes) {
  std::string bytes(num_bytes, '\0');
  for (size_t filled = 0; filled < bytes.size();) {
    const ssize_t n = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::ErrnoToStatus(errno, "getrandom");
    filled += static_cast<size_t>(n);
  }
  return bytes;
}

absl::StatusOr<DeploymentSecret> DeploymentSecret::Generate() {
  absl::StatusOr<std::string> bytes = SecureRandomBytes(32);
  if (!bytes.ok()) return bytes.status();
  return DeploymentSecret(absl::BytesToHexString(*bytes));
}

absl::StatusOr<DeploymentSecret> DeploymentSecret::FromValue(std::string value) {
  if (absl::Status status = CheckValue(value); !status.ok()) return status;
  return DeploymentSecret(std::move(value));
}

absl::StatusOr<DeploymentSecret> DeploymentSecret::Load(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("secret file ", file.string(), ": ", strerror(errno)));
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) > 0 && text.size() < 4096;) text.append(buffer, n);
  ::close(fd);
  if (!stat_ok) return absl::NotFoundError(absl::StrCat("secret file ", file.string(), ": cannot stat"));
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "secret file ", file.string(), " is open to other users (mode ",
        absl::StrFormat("%03o", st.st_mode & 0777), "); chmod 600 it"));
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (absl::Status status = CheckValue(text); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("secret file ", file.string(), ": ", status.message()));
  }
  return DeploymentSecret(std::move(text));
}

absl::Status DeploymentSecret::WriteTo(const std::filesystem::path& file) const {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", file.string()));
  const std::string line = value_ + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int error = errno;
  ::close(fd);
  return written ? absl::OkStatus() : absl::ErrnoToStatus(error, absl::StrCat("cannot write ", file.string()));
}

bool SecretsMatch(std::string_view expected, std::string_view presented) {
  // Every byte of the longer one is looked at, whatever matches.
  const size_t n = std::max(presented.size(), expected.size());
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < presented.size() ? presented[i] : 0;
    const unsigned char b = i < expected.size() ? expected[i] : 0;
    diff |= a ^ b;
  }
  return diff == 0;
}

}  // namespace baton::runtime
