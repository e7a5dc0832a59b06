#include "runtime/process/deployment_secret.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/process/run_directory.h"

namespace baton::runtime {
namespace {

TEST(DeploymentSecretTest, GeneratedSecretsDifferAndRoundTripThroughAPrivateFile) {
  absl::StatusOr<RunDirectory> dir = RunDirectory::Acquire(absl::StrCat("secret-test-", getpid()));
  ASSERT_TRUE(dir.ok()) << dir.status();
  struct stat st {};
  ASSERT_EQ(stat(dir->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700);

  absl::StatusOr<DeploymentSecret> a = DeploymentSecret::Generate();
  absl::StatusOr<DeploymentSecret> b = DeploymentSecret::Generate();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->value().size(), 64u);
  EXPECT_NE(a->value(), b->value());

  const std::filesystem::path file = dir->path() / "secret";
  ASSERT_TRUE(a->WriteTo(file).ok());
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_EQ(a->WriteTo(file).code(), absl::StatusCode::kAlreadyExists);  // never overwritten
  absl::StatusOr<DeploymentSecret> loaded = DeploymentSecret::Load(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->value(), a->value());
}

TEST(DeploymentSecretTest, LoadRefusesFilesOthersCanReadAndShortSecrets) {
  absl::StatusOr<RunDirectory> dir = RunDirectory::Acquire(absl::StrCat("secret-test-", getpid()));
  ASSERT_TRUE(dir.ok());
  const std::filesystem::path open_file = dir->path() / "open";
  std::ofstream(open_file) << std::string(40, 'x') << "\n";
  chmod(open_file.c_str(), 0644);
  absl::StatusOr<DeploymentSecret> loaded = DeploymentSecret::Load(open_file);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("644"), absl::string_view::npos) << loaded.status();

  const std::filesystem::path short_file = dir->path() / "short";
  std::ofstream(short_file) << "hunter2\n";
  chmod(short_file.c_str(), 0600);
  EXPECT_EQ(DeploymentSecret::Load(short_file).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeploymentSecret::Load(dir->path() / "absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(DeploymentSecret::FromValue(std::string(40, ' ')).ok());
}

TEST(DeploymentSecretTest, SecretsMatchOnlyWhenEqual) {
  const std::string secret(40, 'k');
  EXPECT_TRUE(SecretsMatch(secret, secret));
  EXPECT_FALSE(SecretsMatch(secret, ""));
  EXPECT_FALSE(SecretsMatch(secret, secret.substr(1)));
  EXPECT_FALSE(SecretsMatch(secret, secret + "k"));
  std::string flipped = secret;
  flipped[39] = 'j';
  EXPECT_FALSE(SecretsMatch(secret, flipped));
}

}  // namespace
}  // namespace baton::runtime
