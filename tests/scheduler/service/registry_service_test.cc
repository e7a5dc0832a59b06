// The registry's gRPC adapter, called directly (no server): a registration's layout reaches the
// WorkerRegistry.
#include "scheduler/service/registry_service.h"

#include <optional>

#include "gmock/gmock.h"
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
  RegistryServiceImpl service(&registry);
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
  RegistryServiceImpl service(&registry);
  const v1::RegisterRequest request = Registration("d0");
  v1::RegisterResponse response;
  ASSERT_TRUE(service.Register(nullptr, &request, &response).ok());
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "d0"}), runtime::ParallelLayout{});
}

TEST(RegistryServiceTest, RefusesALayoutWithASizeBelowOne) {
  WorkerRegistry registry({{WorkerRole::kDecode, 1}}, absl::Seconds(10));
  RegistryServiceImpl service(&registry);
  v1::RegisterRequest request = Registration("d0");
  request.mutable_layout()->set_tp_size(0);
  request.mutable_layout()->set_pp_size(1);
  v1::RegisterResponse response;
  const grpc::Status status = service.Register(nullptr, &request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("layout tp 0 x pp 1 has a size below 1"));
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "d0"}), std::nullopt);
}

}  // namespace
}  // namespace baton::scheduler
