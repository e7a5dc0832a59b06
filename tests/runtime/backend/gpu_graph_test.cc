// Graphs on the GPU backend, checked on the emulated device: a capture records and runs nothing,
// a replay runs the recorded ops on whatever the captured addresses hold by then, a capture holds
// no host copy, and what a graph still points at must be live when it replays.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
#include "runtime/backend/cpu_backend.h"
#include "runtime/backend/device_buffer.h"
#include "runtime/backend/emulated_gpu_runtime.h"
#include "runtime/backend/gpu_backend.h"
#include "tests/testing/paged_kv_cache.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tolerance.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using ::baton::kernels::reference::RandomVector;
using ::baton::testing::AllClose;
using ::baton::testing::Tolerance;

constexpr Tolerance kFloatTol = ::baton::testing::ToleranceFor(DType::kF32);

class GpuGraphTest : public ::testing::Test {
 protected:
  GpuGraphTest()
      : runtime_(new EmulatedGpuRuntime()),
        gpu_(DeviceKind::kCudaEmulated, std::unique_ptr<GpuRuntime>(runtime_)) {}

  template <typename T>
  T* Upload(const std::vector<T>& host) {
    DeviceBuffer& buffer = buffers_.emplace_back(&gpu_);
    EXPECT_THAT(buffer.Reserve(host.size() * sizeof(T)), IsOk());
    EXPECT_THAT(gpu_.CopyToDevice(buffer.data<void>(), host.data(), host.size() * sizeof(T)),
                IsOk());
    return buffer.data<T>();
  }
  template <typename T>
  std::vector<T> Download(const T* device, size_t count) {
    std::vector<T> host(count);
    EXPECT_THAT(gpu_.CopyToHost(host.data(), device, count * sizeof(T)), IsOk());
    return host;
  }

  EmulatedGpuRuntime* runtime_;  // owned by gpu_
  GpuBackend gpu_;
  std::vector<DeviceBuffer> buffers_;  // after gpu_: freed before it
};

TEST_F(GpuGraphTest, CaptureRunsNothingAndEachReplayReadsTheCurrentInputs) {
  float* a = Upload(std::vector<float>{1, 2, 3});
  float* b = Upload(std::vector<float>{10, 20, 30});
  float* out = Upload(std::vector<float>{0, 0, 0});
  ASSERT_TRUE(gpu_.SupportsGraphs());
  ASSERT_THAT(gpu_.BeginCapture(), IsOk());
  ASSERT_THAT(gpu_.Add({.out = out, .a = a, .b = b, .n = 3}), IsOk());
  ASSERT_THAT(gpu_.CopyOnDevice(b, out, 3 * sizeof(float)), IsOk());  // b = a + b, then again
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = gpu_.EndCapture();
  ASSERT_THAT(graph, IsOk());
  EXPECT_EQ(Download(out, 3), (std::vector<float>{0, 0, 0}));

  const int64_t launches = runtime_->stats().num_launches;
  ASSERT_THAT((*graph)->Replay(), IsOk());
  EXPECT_EQ(Download(out, 3), (std::vector<float>{11, 22, 33}));
  ASSERT_THAT((*graph)->Replay(), IsOk());
  EXPECT_EQ(Download(out, 3), (std::vector<float>{12, 24, 36}));
  const std::vector<float> new_a = {100, 100, 100};
  ASSERT_THAT(gpu_.CopyToDevice(a, new_a.data(), 3 * sizeof(float)), IsOk());
  ASSERT_THAT((*graph)->Replay(), IsOk());
  EXPECT_EQ(Download(out, 3), (std::vector<float>{112, 124, 136}));
  EXPECT_EQ(runtime_->stats().num_launches, launches);  // the replays launched no single op
  EXPECT_EQ(runtime_->stats().num_graph_launches, 3);
}

TEST_F(GpuGraphTest, HostCopiesAndNestingAreRefusedInsideACapture) {
  float* x = Upload(std::vector<float>(4));
  std::vector<float> host(4);
  EXPECT_THAT(gpu_.EndCapture(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(gpu_.BeginCapture(), IsOk());
  EXPECT_THAT(gpu_.BeginCapture(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(gpu_.CopyToHost(host.data(), x, sizeof(float) * 4),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("CopyDeviceToHost while capturing")));
  EXPECT_THAT(gpu_.CopyToDevice(x, host.data(), sizeof(float) * 4),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("CopyHostToDevice")));
  EXPECT_THAT(gpu_.Synchronize(), StatusIs(absl::StatusCode::kFailedPrecondition));
  // Bad params fail at capture, as a launch's would.
  EXPECT_THAT(gpu_.Add({.out = x, .a = x, .b = nullptr, .n = 4}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = gpu_.EndCapture();
  ASSERT_THAT(graph, IsOk());
  EXPECT_THAT(gpu_.CopyToHost(host.data(), x, sizeof(float) * 4), IsOk());  // capture over
}

// A graph keeps the addresses it captured: once a buffer it reads is freed, the replay fails on the
// emulated device (a GPU would read whatever lies there now).
TEST_F(GpuGraphTest, ReplayThatReadsAFreedBufferIsInternal) {
  float* out = Upload(std::vector<float>(8));
  auto scratch = std::make_unique<DeviceBuffer>(&gpu_);
  ASSERT_THAT(scratch->Reserve(8 * sizeof(float)), IsOk());
  ASSERT_THAT(gpu_.BeginCapture(), IsOk());
  ASSERT_THAT(gpu_.Add({.out = out, .a = out, .b = scratch->data<float>(), .n = 8}), IsOk());
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = gpu_.EndCapture();
  ASSERT_THAT(graph, IsOk());
  ASSERT_THAT((*graph)->Replay(), IsOk());
  scratch.reset();
  EXPECT_THAT((*graph)->Replay(), StatusIs(absl::StatusCode::kInternal,
                                           AllOf(HasSubstr("graph node 0"), HasSubstr("Add"),
                                                 HasSubstr("already freed"))));
}

// The split-KV workspace taken during a capture stays the graph's (a replay writes it) and returns
// to the cache with the graph; the replays match the CPU.
TEST_F(GpuGraphTest, SplitKvWorkspaceBelongsToTheGraph) {
  constexpr int kKvHeads = 2, kGroup = 2, kHeadDim = 64, kBlockSize = 16;
  constexpr int kHeads = kKvHeads * kGroup;
  testing::TestPagedKvCache cache({1500, 1, 700}, kBlockSize, kKvHeads, kHeadDim, 40, 41);
  const int num_seqs = cache.num_seqs();
  const int q_stride = kHeads * kHeadDim;
  const std::vector<float> q = RandomVector(num_seqs * q_stride, 42);
  kernels::PagedAttentionParams p = cache.DecodeParams(q.data(), kHeads);
  ASSERT_GT(kernels::PagedAttentionSplitKvNumSplits(p, runtime_->num_sms()), 1);
  std::vector<float> expected(num_seqs * kHeads * kHeadDim);
  p.out = expected.data();
  CpuBackend cpu(nullptr);
  ASSERT_THAT(cpu.PagedAttentionDecode(p), IsOk());

  kernels::PagedKvView view = cache.view();
  const int64_t layer_offset = static_cast<float*>(view.k) - cache.k_pool().data();
  view.k = Upload(cache.k_pool()) + layer_offset;
  view.v = Upload(cache.v_pool()) + layer_offset;
  p.out = Upload(std::vector<float>(expected.size(), NAN));
  p.q = Upload(q);
  p.cache = view;
  p.block_tables = Upload(cache.block_tables());
  p.context_lens = Upload(cache.context_lens());

  const size_t in_use_before = gpu_.allocator().stats().bytes_in_use;
  ASSERT_THAT(gpu_.BeginCapture(), IsOk());
  ASSERT_THAT(gpu_.PagedAttentionDecode(p), IsOk());
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = gpu_.EndCapture();
  ASSERT_THAT(graph, IsOk());
  EXPECT_GT(gpu_.allocator().stats().bytes_in_use, in_use_before);  // the graph's workspace
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_THAT((*graph)->Replay(), IsOk());
    EXPECT_TRUE(AllClose(Download(p.out, expected.size()), expected, kFloatTol));
  }
  graph->reset();
  EXPECT_EQ(gpu_.allocator().stats().bytes_in_use, in_use_before);
}

}  // namespace
}  // namespace baton::runtime
