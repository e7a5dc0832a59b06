// absl::Status <-> grpc::Status: codes and messages as they are, payloads through the error details
// (a google.rpc.Status-shaped RpcStatus), so a draining worker is still told apart after the wire.
#include "runtime/rpc/status_conversion.h"

#include "gtest/gtest.h"
#include "runtime/worker/worker_draining.h"

namespace baton::rpc {
namespace {

TEST(StatusConversionTest, CodeAndMessageRoundTrip) {
  const absl::Status status = absl::ResourceExhaustedError("900 blocks needed");
  const grpc::Status wire = ToGrpcStatus(status);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(wire.error_message(), "900 blocks needed");
  EXPECT_TRUE(wire.error_details().empty());  // no payload, no details
  EXPECT_EQ(FromGrpcStatus(wire), status);
  EXPECT_TRUE(FromGrpcStatus(ToGrpcStatus(absl::OkStatus())).ok());
}

TEST(StatusConversionTest, PayloadsCrossTheWire) {
  const grpc::Status wire = ToGrpcStatus(runtime::WorkerDrainingError());
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(wire.error_details().empty());
  const absl::Status back = FromGrpcStatus(wire);
  EXPECT_TRUE(runtime::IsWorkerDraining(back));
  EXPECT_EQ(back, runtime::WorkerDrainingError());
  // Unavailable for any other reason is not draining.
  EXPECT_FALSE(runtime::IsWorkerDraining(FromGrpcStatus(ToGrpcStatus(absl::UnavailableError("worker is draining")))));
}

TEST(StatusConversionTest, DetailsThatDoNotParseAreIgnored) {
  const absl::Status back = FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "boom", "\xff\xff not a proto"));
  EXPECT_EQ(back, absl::InternalError("boom"));
}

}  // namespace
}  // namespace baton::rpc
