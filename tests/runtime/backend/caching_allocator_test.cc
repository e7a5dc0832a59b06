// The caching allocator over the emulated runtime: size classes, reuse without Malloc after
// warm-up, EmptyCache, stats, and the empty-the-cache-and-retry on out of memory.
#include "runtime/backend/caching_allocator.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend/emulated_gpu_runtime.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;

constexpr size_t kMiB = size_t{1} << 20;

TEST(CachingAllocatorTest, RoundsToSizeClasses) {
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(kMiB - 1), kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(2 * kMiB + 1), 4 * kMiB);
  EXPECT_EQ(CachingAllocator::RoundSize(5 * kMiB), 6 * kMiB);
}

TEST(CachingAllocatorTest, ReusesFreedBlocksOfTheSameClass) {
  EmulatedGpuRuntime runtime;
  CachingAllocator allocator(&runtime);
  auto a = allocator.Allocate(1000);  // class 1024
  ASSERT_THAT(a, IsOk());
  allocator.Free(*a);
  EXPECT_EQ(allocator.stats().bytes_cached, 1024u);
  auto b = allocator.Allocate(900);  // same class: the same block, no Malloc
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(*b, *a);
  auto c = allocator.Allocate(1500);  // another class
  ASSERT_THAT(c, IsOk());
  EXPECT_NE(*c, *a);
  const CachingAllocator::Stats& stats = allocator.stats();
  EXPECT_EQ(stats.num_runtime_mallocs, 2);
  EXPECT_EQ(stats.num_cache_hits, 1);
  EXPECT_EQ(stats.bytes_in_use, 1024u + 1536u);
  EXPECT_EQ(stats.bytes_cached, 0u);
  EXPECT_EQ(stats.bytes_reserved, 1024u + 1536u);
  EXPECT_EQ(runtime.stats().bytes_in_use, 1024u + 1536u);
  allocator.Free(*b);
  allocator.Free(*c);
  allocator.Free(nullptr);
}

TEST(CachingAllocatorTest, NoMallocOnTheHotPathAfterWarmUp) {
  EmulatedGpuRuntime runtime;
  CachingAllocator allocator(&runtime);
  const std::vector<size_t> step = {4096, 12 * 1024, 3 * kMiB, 700, 4096};
  for (int round = 0; round < 5; ++round) {
    std::vector<void*> blocks;
    for (size_t bytes : step) {
      auto ptr = allocator.Allocate(bytes);
      ASSERT_THAT(ptr, IsOk());
      blocks.push_back(*ptr);
    }
    for (void* ptr : blocks) allocator.Free(ptr);
  }
  EXPECT_EQ(allocator.stats().num_runtime_mallocs, static_cast<int64_t>(step.size()));
  EXPECT_EQ(runtime.stats().num_mallocs, static_cast<int64_t>(step.size()));
  EXPECT_EQ(allocator.stats().num_cache_hits, 4 * static_cast<int64_t>(step.size()));
  EXPECT_EQ(allocator.stats().bytes_in_use, 0u);
  const size_t reserved = 2 * 4096 + 12 * 1024 + 4 * kMiB + 1024;
  EXPECT_EQ(allocator.stats().bytes_reserved, reserved);
  EXPECT_EQ(allocator.stats().peak_bytes_reserved, reserved);

  ASSERT_THAT(allocator.EmptyCache(), IsOk());
  EXPECT_EQ(allocator.stats().bytes_reserved, 0u);
  EXPECT_EQ(allocator.stats().num_runtime_frees, static_cast<int64_t>(step.size()));
  EXPECT_EQ(runtime.stats().bytes_in_use, 0u);
  EXPECT_EQ(runtime.stats().peak_bytes_in_use, reserved);
}

TEST(CachingAllocatorTest, EmptiesTheCacheAndRetriesWhenTheDeviceIsFull) {
  EmulatedGpuRuntime runtime(/*capacity_bytes=*/8192);
  CachingAllocator allocator(&runtime);
  auto a = allocator.Allocate(4096);
  ASSERT_THAT(a, IsOk());
  allocator.Free(*a);  // cached: the runtime still counts it
  auto b = allocator.Allocate(6000);  // class 6144: fits only once the cached block is returned
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(allocator.stats().num_runtime_frees, 1);
  EXPECT_EQ(runtime.stats().bytes_in_use, 6144u);
  EXPECT_THAT(allocator.Allocate(4096), StatusIs(absl::StatusCode::kResourceExhausted));
  allocator.Free(*b);
}

TEST(CachingAllocatorTest, DestructorReturnsEverything) {
  EmulatedGpuRuntime runtime;
  {
    CachingAllocator allocator(&runtime);
    auto kept = allocator.Allocate(100);
    auto freed = allocator.Allocate(5 * kMiB);
    ASSERT_THAT(kept, IsOk());
    ASSERT_THAT(freed, IsOk());
    allocator.Free(*freed);
    EXPECT_THAT(allocator.Allocate(0), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_EQ(runtime.stats().bytes_in_use, 0u);
  EXPECT_EQ(runtime.stats().num_frees, 2);
}

TEST(CachingAllocatorDeathTest, FreeingAnUnknownPointerAborts) {
  EmulatedGpuRuntime runtime;
  CachingAllocator allocator(&runtime);
  int not_allocated = 0;
  EXPECT_DEATH(allocator.Free(&not_allocated), "check failed");
}

}  // namespace
}  // namespace baton::runtime
