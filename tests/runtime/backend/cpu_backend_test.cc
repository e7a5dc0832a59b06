// The CPU backend and the pieces every backend shares: DeviceBuffer growth, the copies, an op's
// validation passing through, and the registry.
#include "runtime/backend/cpu_backend.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend/backend_registry.h"
#include "runtime/backend/device_buffer.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

TEST(DeviceBufferTest, GrowsOnlyWhenAskedForMore) {
  CpuBackend backend(nullptr);
  DeviceBuffer buffer(&backend);
  EXPECT_EQ(buffer.data<float>(), nullptr);
  ASSERT_THAT(buffer.Reserve(256), IsOk());
  float* first = buffer.data<float>();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  ASSERT_THAT(buffer.Reserve(100), IsOk());
  EXPECT_EQ(buffer.data<float>(), first);
  EXPECT_EQ(buffer.capacity_bytes(), 256u);
  ASSERT_THAT(buffer.Reserve(4096), IsOk());
  EXPECT_EQ(buffer.capacity_bytes(), 4096u);

  DeviceBuffer moved = std::move(buffer);
  EXPECT_EQ(moved.capacity_bytes(), 4096u);
  EXPECT_EQ(buffer.data<float>(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
}

TEST(CpuBackendTest, CopiesRoundTrip) {
  ThreadPool pool(2);
  CpuBackend backend(&pool);
  EXPECT_EQ(backend.device(), DeviceKind::kCpu);
  EXPECT_TRUE(backend.IsHostMemory());
  const std::vector<float> host = {1, 2, 3, 4, 5};
  DeviceBuffer a(&backend), b(&backend);
  ASSERT_THAT(a.Reserve(sizeof(float) * host.size()), IsOk());
  ASSERT_THAT(b.Reserve(sizeof(float) * host.size()), IsOk());
  ASSERT_THAT(backend.CopyToDevice(a.data<void>(), host.data(), sizeof(float) * 5), IsOk());
  ASSERT_THAT(backend.CopyOnDevice(b.data<void>(), a.data<void>(), sizeof(float) * 5), IsOk());
  ASSERT_THAT(backend.Add({.out = b.data<float>(), .a = b.data<float>(), .b = a.data<float>(), .n = 5}), IsOk());
  std::vector<float> out(5);
  ASSERT_THAT(backend.CopyToHost(out.data(), b.data<void>(), sizeof(float) * 5), IsOk());
  EXPECT_THAT(out, ::testing::ElementsAre(2, 4, 6, 8, 10));
}

TEST(CpuBackendTest, OpsValidateLikeTheirKernels) {
  CpuBackend backend(nullptr);
  kernels::KvGatherParams params{};
  params.num_seqs = 1;
  EXPECT_THAT(backend.KvGather(params), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(backend.Add({.out = nullptr, .a = nullptr, .b = nullptr, .n = 3}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The GPU kinds are tested with the GPU backend (gpu_backend_test.cc).
TEST(BackendRegistryTest, CreatesTheCpuBackend) {
  ThreadPool pool(1);
  auto cpu = CreateBackend(BackendOptions{.device = DeviceKind::kCpu, .pool = &pool});
  ASSERT_THAT(cpu, IsOk());
  EXPECT_EQ((*cpu)->device(), DeviceKind::kCpu);
}

}  // namespace
}  // namespace baton::runtime
