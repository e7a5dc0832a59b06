// ListenExclusive on real ports: a port in use is an error naming it (no SO_REUSEPORT sharing);
// TLS credentials need readable PEM files.
#include "runtime/rpc/grpc_listener.h"

#include <fstream>

#include "baton/v1/worker.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::rpc {
namespace {

using absl_testing::StatusIs;
using ::testing::HasSubstr;

TEST(GrpcListenerTest, APortInUseIsAnErrorNamingIt) {
  v1::WorkerRegistryService::Service first_service, second_service;  // every method UNIMPLEMENTED
  absl::StatusOr<GrpcListener> first = ListenExclusive("first", "127.0.0.1", 0, {&first_service});
  ASSERT_THAT(first, absl_testing::IsOk());
  ASSERT_GT(first->port, 0);
  const std::string port = std::to_string(first->port);
  EXPECT_THAT(ListenExclusive("second", "127.0.0.1", first->port, {&second_service}),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("second: cannot listen on 127.0.0.1:" + port + " (is the port in use?)")));
  first->server->Shutdown();
}

TEST(GrpcListenerTest, CredentialsFromPemFiles) {
  EXPECT_THAT(ServerCredentialsFromPem("", ""), absl_testing::IsOk());  // plain text
  EXPECT_THAT(ServerCredentialsFromPem("/nonexistent/cert.pem", "/nonexistent/key.pem"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/nonexistent/cert.pem: cannot read")));
  const std::string not_pem = ::testing::TempDir() + "/not.pem";
  std::ofstream(not_pem) << "hello\n";
  EXPECT_THAT(ReadPemFile(not_pem), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a PEM file")));
}

}  // namespace
}  // namespace baton::rpc
