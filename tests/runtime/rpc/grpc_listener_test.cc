// ListenExclusive on real ports: a port in use is an error naming it (no SO_REUSEPORT sharing); a
// request that does not parse gets INVALID_ARGUMENT; TLS credentials need readable PEM files.
#include "runtime/rpc/grpc_listener.h"

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>

#include "grpcpp/generic/generic_stub.h"

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

// Sends `bytes` as the request of `method` (unary) and returns the call's status.
grpc::Status CallWithRawBytes(int port, const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                             grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

TEST(GrpcListenerTest, ARequestThatDoesNotParseIsInvalidArgumentNamingTheMethod) {
  v1::WorkerRegistryService::Service service;  // every method UNIMPLEMENTED
  absl::StatusOr<GrpcListener> listener = ListenExclusive("registry", "127.0.0.1", 0, {&service});
  ASSERT_THAT(listener, absl_testing::IsOk());
  const std::string method = "/baton.v1.WorkerRegistryService/Register";
  // Field 4 (address, a string) holding the byte 0xff: not UTF-8.
  const grpc::Status invalid_utf8 = CallWithRawBytes(listener->port, method, std::string("\x22\x01\xff", 3));
  EXPECT_EQ(invalid_utf8.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(invalid_utf8.error_message(),
              HasSubstr("the request does not parse as " + method + "'s message: a string field holds "
                        "invalid UTF-8"));
  // A truncated field: not protobuf.
  EXPECT_EQ(CallWithRawBytes(listener->port, method, std::string("\x22\x05" "ab", 4)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // A valid message reaches the handler, whose status passes unchanged.
  EXPECT_EQ(CallWithRawBytes(listener->port, method, std::string("\x22\x01x", 3)).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  listener->server->Shutdown();
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
