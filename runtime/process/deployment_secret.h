// DeploymentSecret: the shared secret that authenticates every internal channel of one deployment
// (the scheduler's worker registry, each worker's API, each prefill worker's KV server).
//
// `baton serve` generates one per start (256 bits from getrandom), writes it to a file only its
// user can read, in a directory only its user can enter, and hands the children that file's path
// (`--secret-file`): the secret itself never appears on a command line or in the environment. A
// worker or scheduler started by hand, on this host or another, reads the same file. A caller that
// does not present it is refused before any work (runtime/rpc/internal_auth.h for gRPC; the KV
// wire's hello, tcp_wire.h).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::runtime {

class DeploymentSecret {
 public:
  // 32 random bytes, as 64 lowercase hex digits. Internal if the kernel gives no randomness.
  static absl::StatusOr<DeploymentSecret> Generate();
  // Reads a secret file: one line of at least 32 printable ASCII characters (a trailing newline is
  // dropped). FailedPrecondition when the group or others may read or write the file (a secret
  // others can read authenticates nobody), NotFound when it cannot be read, InvalidArgument for
  // a short or non-printable secret.
  static absl::StatusOr<DeploymentSecret> Load(const std::filesystem::path& file);
  // From the value itself, checked as Load checks it (tests, and the KV server's options).
  static absl::StatusOr<DeploymentSecret> FromValue(std::string value);

  // Creates `file` with mode 0600 and writes the secret; AlreadyExists if the file exists (it is
  // never overwritten or followed through a symlink).
  absl::Status WriteTo(const std::filesystem::path& file) const;

  const std::string& value() const { return value_; }

 private:
  explicit DeploymentSecret(std::string value) : value_(std::move(value)) {}
  std::string value_;
};

// `num_bytes` bytes from the kernel's CSPRNG (getrandom): secrets, KV grants, link nonces. Internal
// if the kernel gives no randomness.
absl::StatusOr<std::string> SecureRandomBytes(size_t num_bytes);

// Whether `presented` equals `expected`, in time independent of where they differ.
bool SecretsMatch(std::string_view expected, std::string_view presented);

}  // namespace baton::runtime
