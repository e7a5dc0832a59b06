// CheckedCommunicator: on the cuda-emulated device a collective handed host memory fails (as NCCL
// on a GPU would), naming the op; device memory goes through; on the CPU backend host memory is
// what collectives take.
#include "runtime/engine/checked_communicator.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/parallel/cpu_communicator.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

class CheckedCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto group = CpuCommGroup::Create({.num_ranks = 1});
    ASSERT_THAT(group, IsOk());
    group_ = *std::move(group);
    auto comm = group_->Join(0);
    ASSERT_THAT(comm, IsOk());
    comm_ = *std::move(comm);
  }

  std::unique_ptr<DeviceBackend> Backend(DeviceKind device) {
    auto backend = CreateBackend(BackendOptions{.device = device, .pool = &pool_});
    EXPECT_THAT(backend, IsOk());
    return backend.ok() ? *std::move(backend) : nullptr;
  }

  ThreadPool pool_{1};
  std::shared_ptr<CpuCommGroup> group_;
  std::unique_ptr<Communicator> comm_;
};

TEST_F(CheckedCommunicatorTest, EmulatedDeviceRefusesHostBuffers) {
  std::unique_ptr<DeviceBackend> backend = Backend(DeviceKind::kCudaEmulated);
  ASSERT_NE(backend, nullptr);
  CheckedCommunicator checked(comm_.get(), backend.get());
  std::vector<float> host(16, 1.0f);
  EXPECT_THAT(checked.AllReduceSum(host.data(), host.size()),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("all-reduce")));
  EXPECT_THAT(checked.AllGather(host.data(), host.data() + 8, 8 * sizeof(float)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("all-gather send")));

  absl::StatusOr<void*> device = backend->Allocate(16 * sizeof(float));
  ASSERT_THAT(device, IsOk());
  EXPECT_THAT(checked.AllReduceSum(static_cast<float*>(*device), 16), IsOk());
  // One element past the allocation is not device memory of this op any more.
  EXPECT_THAT(checked.AllReduceSum(static_cast<float*>(*device), 17),
              StatusIs(absl::StatusCode::kInternal));
  backend->Free(*device);
}

TEST_F(CheckedCommunicatorTest, CpuBackendTakesHostBuffers) {
  std::unique_ptr<DeviceBackend> backend = Backend(DeviceKind::kCpu);
  ASSERT_NE(backend, nullptr);
  CheckedCommunicator checked(comm_.get(), backend.get());
  std::vector<float> host(16, 1.0f);
  EXPECT_THAT(checked.AllReduceSum(host.data(), host.size()), IsOk());
  EXPECT_EQ(host[0], 1.0f);  // a group of one sums to itself
}

}  // namespace
}  // namespace baton::runtime
