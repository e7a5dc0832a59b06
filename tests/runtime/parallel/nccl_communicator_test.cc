// NcclCommunicator: parameter checks (run everywhere NCCL is built), a single-rank smoke test (one
// GPU) and the collectives between two GPU ranks (two GPUs); the GPU tests skip, saying why, where
// fewer devices are visible.
#include "runtime/parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/dtype.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;

int VisibleDevices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

// Device copy of `host`, freed by the caller.
float* ToDevice(const std::vector<float>& host) {
  float* device = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), host.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  return device;
}

std::vector<float> ToHost(const float* device, size_t count) {
  std::vector<float> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return host;
}

TEST(NcclCommunicatorTest, RejectsBadParamsBeforeTouchingADevice) {
  EXPECT_THAT(CreateNcclCommunicator({.rank = 2, .num_ranks = 2}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateNcclCommunicator({.rank = 0, .num_ranks = 1, .device = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      CreateNcclCommunicator({.rank = 0, .num_ranks = 1, .timeout = absl::ZeroDuration()}),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(NcclCommunicatorTest, SingleRankSmoke) {
  if (VisibleDevices() < 1) GTEST_SKIP() << "needs 1 CUDA device, " << VisibleDevices() << " visible";
  auto id = CreateNcclUniqueId();
  ASSERT_THAT(id, IsOk());
  auto comm = CreateNcclCommunicator(
      {.rank = 0, .num_ranks = 1, .device = 0, .unique_id = *id, .timeout = absl::Seconds(30)});
  ASSERT_THAT(comm, IsOk());
  std::vector<float> host = {1.0f, 2.0f, 3.0f};
  float* data = ToDevice(host);
  EXPECT_THAT((*comm)->AllReduceSum(data, host.size()), IsOk());
  EXPECT_EQ(ToHost(data, host.size()), host);
  EXPECT_THAT((*comm)->Broadcast(data, host.size() * sizeof(float), 0), IsOk());
  EXPECT_THAT((*comm)->Barrier(), IsOk());
  (*comm)->Abort("test");
  EXPECT_THAT((*comm)->Barrier(), StatusIs(absl::StatusCode::kAborted));
  cudaFree(data);
}

TEST(NcclCommunicatorTest, TwoRanksCollectivesAndSendRecv) {
  if (VisibleDevices() < 2) {
    GTEST_SKIP() << "needs 2 CUDA devices, " << VisibleDevices() << " visible";
  }
  auto id = CreateNcclUniqueId();
  ASSERT_THAT(id, IsOk());
  constexpr size_t kCount = 1001;
  std::vector<absl::Status> statuses(2);
  std::vector<std::vector<float>> reduced(2), gathered(2), received(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto comm = CreateNcclCommunicator({.rank = rank, .num_ranks = 2, .device = rank,
                                          .unique_id = *id, .timeout = absl::Seconds(60)});
      if (!comm.ok()) {
        statuses[rank] = comm.status();
        return;
      }
      std::vector<float> host(kCount);
      for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>(rank * 1000 + i);
      float* data = ToDevice(host);
      float* gather = ToDevice(std::vector<float>(2 * kCount));
      absl::Status status = (*comm)->AllGather(data, gather, kCount * sizeof(float));
      if (status.ok()) status = (*comm)->AllReduceSum(data, kCount);
      reduced[rank] = ToHost(data, kCount);
      gathered[rank] = ToHost(gather, 2 * kCount);
      // Stage 0 sends its reduced buffer to stage 1.
      if (status.ok()) {
        status = rank == 0 ? (*comm)->Send(data, kCount * sizeof(float), 1)
                           : (*comm)->Recv(gather, kCount * sizeof(float), 0);
      }
      if (rank == 1) received[rank] = ToHost(gather, kCount);
      if (status.ok()) status = (*comm)->Barrier();
      statuses[rank] = status;
      cudaFree(data);
      cudaFree(gather);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) ASSERT_THAT(statuses[rank], IsOk()) << "rank " << rank;
  for (int rank = 0; rank < 2; ++rank) {
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(reduced[rank][i], static_cast<float>(i) + static_cast<float>(1000 + i));
      ASSERT_EQ(gathered[rank][i], static_cast<float>(i));
      ASSERT_EQ(gathered[rank][kCount + i], static_cast<float>(1000 + i));
    }
  }
  EXPECT_EQ(received[1], reduced[0]);
}

}  // namespace
}  // namespace baton::runtime
