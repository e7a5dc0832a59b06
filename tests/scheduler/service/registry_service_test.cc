// The registry's gRPC adapter, called directly (no server): a registration's layout reaches the
// WorkerRegistry. And served on a real port with a deployment secret: a call without it is refused.
#include "scheduler/service/registry_service.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "runtime/rpc/internal_auth.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

v1::RegisterRequest Registration(const std::string& incarnation_id) {
  v1::RegisterRequest request;
  request.set_role(v1::WORKER_ROLE_DECODE);
  request.set_instance_idx(0);
  request.set_incarnation_id(incarnation_id);
  request.set_address("127.0.0.1:6000");
  request.set_num_kv_blocks(32);
  request.set_block_size(4);
  return request;
}

TEST(RegistryServiceTest, KeepsTheLayoutAWorkerRegistersWith) {
  WorkerRegistry registry({{WorkerRole::kDecode, 1}}, absl::Seconds(10));
  RegistryServiceImpl service(&registry, "");
  v1::RegisterRequest request = Registration("d0");
  request.mutable_layout()->set_tp_size(2);
  request.mutable_layout()->set_pp_size(2);
  request.mutable_layout()->add_stage_num_layers(1);
  request.mutable_layout()->add_stage_num_layers(3);
  v1::RegisterResponse response;
  ASSERT_TRUE(service.Register(nullptr, &request, &response).ok());
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "d0"}),
            (runtime::ParallelLayout{.tp_size = 2, .pp_size = 2, .stage_num_layers = {1, 3}}));
}

TEST(RegistryServiceTest, AWorkerThatSendsNoLayoutRunsOneRank) {
  WorkerRegistry registry({{WorkerRole::kDecode, 1}}, absl::Seconds(10));
  RegistryServiceImpl service(&registry, "");
  const v1::RegisterRequest request = Registration("d0");
  v1::RegisterResponse response;
  ASSERT_TRUE(service.Register(nullptr, &request, &response).ok());
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "d0"}), runtime::ParallelLayout{});
}

TEST(RegistryServiceTest, RefusesALayoutWithASizeBelowOne) {
  WorkerRegistry registry({{WorkerRole::kDecode, 1}}, absl::Seconds(10));
  RegistryServiceImpl service(&registry, "");
  v1::RegisterRequest request = Registration("d0");
  request.mutable_layout()->set_tp_size(0);
  request.mutable_layout()->set_pp_size(1);
  v1::RegisterResponse response;
  const grpc::Status status = service.Register(nullptr, &request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("layout tp 0 x pp 1 has a size below 1"));
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "d0"}), std::nullopt);
}

TEST(RegistryServiceTest, ACallWithoutTheDeploymentSecretIsRefusedBeforeAnyWork) {
  const std::string secret(64, 's');
  WorkerRegistry registry({{WorkerRole::kDecode, 1}}, absl::Seconds(10));
  RegistryServiceImpl service(&registry, secret);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::WorkerRegistryService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  const v1::RegisterRequest request = Registration("intruder");
  for (const std::string& presented : {std::string(), std::string(64, 't'), secret.substr(1)}) {
    grpc::ClientContext context;
    rpc::AttachDeploymentSecret(context, presented);
    v1::RegisterResponse response;
    const grpc::Status status = stub->Register(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << presented;
  }
  EXPECT_TRUE(registry.LiveInstances(WorkerRole::kDecode).empty());

  grpc::ClientContext context;
  rpc::AttachDeploymentSecret(context, secret);
  v1::RegisterResponse response;
  EXPECT_TRUE(stub->Register(&context, Registration("d0"), &response).ok());
  server->Shutdown();
}

}  // namespace
}  // namespace baton::scheduler
