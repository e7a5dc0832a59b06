// Tests of the SIMT emulation itself: indices, barriers, warp shuffles, shared memory, and the
// detection of barriers that can never complete.
#include "kernels/simt/simt.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/simt/device.h"
#include "tests/testing/status_matchers.h"

namespace baton::simt {
namespace {

using absl_testing::IsOk;
using absl_testing::StatusIs;
using ::testing::HasSubstr;

LaunchShape Shape(unsigned grid_x, unsigned block_x, unsigned grid_y = 1, unsigned block_y = 1) {
  LaunchShape shape;
  shape.grid_x = grid_x;
  shape.grid_y = grid_y;
  shape.block_x = block_x;
  shape.block_y = block_y;
  return shape;
}

TEST(SimtTest, EveryThreadOfEveryBlockRunsOnceWithItsIndices) {
  const LaunchShape shape = Shape(3, 8, 2, 4);  // grid 3x2, block 8x4
  std::vector<int> hits(3 * 2 * 8 * 4, 0);
  ASSERT_THAT(Launch(shape,
                     [&] {
                       EXPECT_EQ(blockDim.x, 8u);
                       EXPECT_EQ(blockDim.y, 4u);
                       EXPECT_EQ(gridDim.x, 3u);
                       EXPECT_EQ(gridDim.y, 2u);
                       const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
                       const unsigned thread = threadIdx.y * blockDim.x + threadIdx.x;
                       ++hits[block * 32 + thread];
                     }),
              IsOk());
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(SimtTest, SyncThreadsOrdersSharedMemoryWritesAndReads) {
  constexpr int kThreads = 96;
  std::vector<int> out(kThreads);
  ASSERT_THAT(Launch(Shape(1, kThreads),
                     [&] {
                       BATON_SHARED_ARRAY(int, values, kThreads);
                       const int t = static_cast<int>(threadIdx.x);
                       values[t] = t * 10;
                       __syncthreads();
                       // Read a value another thread (one that runs later) wrote.
                       out[t] = values[(t + 1) % kThreads];
                     }),
              IsOk());
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(out[t], ((t + 1) % kThreads) * 10);
}

TEST(SimtTest, SharedMemoryIsPerBlockAndStartsPoisoned) {
  std::vector<float> first_read(2);
  ASSERT_THAT(Launch(Shape(2, 32),
                     [&] {
                       BATON_SHARED_ARRAY(float, cell, 1);
                       if (threadIdx.x == 0) first_read[blockIdx.x] = cell[0];
                       __syncthreads();
                       if (threadIdx.x == 0) cell[0] = 1.0f;  // must not leak into block 1
                     }),
              IsOk());
  EXPECT_TRUE(std::isnan(first_read[0]));
  EXPECT_TRUE(std::isnan(first_read[1]));
}

TEST(SimtTest, ShuffleXorReducesAWarp) {
  std::vector<float> out(64);
  ASSERT_THAT(Launch(Shape(1, 64),
                     [&] {
                       float value = static_cast<float>(threadIdx.x);
                       for (int offset = 16; offset > 0; offset /= 2) {
                         value += __shfl_xor_sync(0xffffffffu, value, offset);
                       }
                       out[threadIdx.x] = value;
                     }),
              IsOk());
  // Warp 0 sums 0..31, warp 1 sums 32..63; every lane holds its warp's sum.
  for (int t = 0; t < 32; ++t) EXPECT_EQ(out[t], 496.0f);
  for (int t = 32; t < 64; ++t) EXPECT_EQ(out[t], 1520.0f);
}

TEST(SimtTest, ShuffleBroadcastsAndPartialWarpsReadPoison) {
  std::vector<int> from_lane3(40);
  std::vector<float> from_missing_lane(40);
  ASSERT_THAT(Launch(Shape(1, 40),  // warp 1 has lanes 0..7 only
                     [&] {
                       const int t = static_cast<int>(threadIdx.x);
                       from_lane3[t] = __shfl_sync(0xffffffffu, t * 2, 3);
                       from_missing_lane[t] = __shfl_sync(0xffffffffu, 1.0f, 20);
                     }),
              IsOk());
  for (int t = 0; t < 32; ++t) EXPECT_EQ(from_lane3[t], 6);
  for (int t = 32; t < 40; ++t) EXPECT_EQ(from_lane3[t], 70);
  EXPECT_EQ(from_missing_lane[0], 1.0f);
  EXPECT_TRUE(std::isnan(from_missing_lane[35]));
}

TEST(SimtTest, ThreadsThatExitLeaveLaterBarriers) {
  // As on Volta and later GPUs: a barrier waits for the threads that have not exited.
  int second_barrier = 0;
  ASSERT_THAT(Launch(Shape(2, 64),
                     [&] {
                       __syncthreads();
                       if (threadIdx.x < 32) return;
                       __syncthreads();
                       ++second_barrier;
                     }),
              IsOk());
  EXPECT_EQ(second_barrier, 64);
}

TEST(SimtTest, ExitedThreadsDoNotBlockBarriers) {
  int after_barrier = 0;
  ASSERT_THAT(Launch(Shape(1, 64),
                     [&] {
                       if (threadIdx.x >= 40) return;  // exits before the barrier
                       __syncthreads();
                       ++after_barrier;
                     }),
              IsOk());
  EXPECT_EQ(after_barrier, 40);
}

TEST(SimtTest, BarrierThatCanNeverCompleteIsReportedNotHung) {
  EXPECT_THAT(Launch(Shape(2, 64),
                     [&] {
                       // Lanes 16..31 of warp 1 wait at a warp barrier that lanes 0..15 never
                       // reach, because those wait at a block barrier that 16..31 never reach.
                       if (threadIdx.x >= 48) {
                         __syncwarp();
                       }
                       __syncthreads();
                     }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("deadlock in block (0,0,0)")));
}

TEST(SimtTest, ShuffleThatSomeLanesSkipIsReported) {
  EXPECT_THAT(Launch(Shape(1, 32),
                     [&] {
                       float v = 1.0f;
                       if (threadIdx.x < 16) v += __shfl_xor_sync(0xffffffffu, v, 1);
                       __syncthreads();
                     }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("warp barrier")));
}

TEST(SimtTest, RejectsBadShapes) {
  EXPECT_THAT(Launch(Shape(1, 2048), [] {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Launch(Shape(1, 0), [] {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Launch(Shape(0, 32), [] {}), IsOk());  // an empty grid does nothing
}

// What a GPU refuses at launch (cudaErrorInvalidConfiguration) the emulation refuses too, so a
// launch shape that grows with a step's tokens or sequences fails in CI, not first on a GPU.
TEST(SimtTest, RefusesShapesPastCudasLimits) {
  const auto refused = [](LaunchShape shape, const char* what) {
    EXPECT_THAT(Launch(shape, [] {}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
  };
  refused(Shape(1, 32, /*grid_y=*/kMaxGridYz + 1), "grid");
  LaunchShape deep = Shape(1, 32);
  deep.grid_z = kMaxGridYz + 1;
  refused(deep, "grid");
  LaunchShape tall_block = Shape(1, 1);
  tall_block.block_z = kMaxBlockZ + 1;
  refused(tall_block, "block");
  refused(Shape(1, 1, 1, /*block_y=*/kMaxBlockXy + 1), "block");
  LaunchShape big_dynamic = Shape(1, 32);
  big_dynamic.dynamic_shared_bytes = kMaxStaticSharedBytes + 1;
  refused(big_dynamic, "dynamic shared memory");

  // The limits themselves are accepted (checked, not run: 2^31 - 1 blocks).
  LaunchShape widest = Shape(kMaxGridX, kMaxThreadsPerBlock, kMaxGridYz);
  widest.grid_z = kMaxGridYz;
  widest.dynamic_shared_bytes = kMaxStaticSharedBytes;
  EXPECT_THAT(CheckLaunchShape(widest), IsOk());
}

// A warp's m16n8k16 MMA: each lane loads its fragments in the PTX ISA's layout, the product comes
// back in the accumulator layout; D = A B + C against a plain triple loop.
TEST(SimtTest, WarpMmaComputesTheProductFromPtxFragments) {
  float a[16][16], b[16][8], c[16][8];
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 16; ++k) a[r][k] = static_cast<float>((r * 7 + k * 3) % 11 - 5) / 4;
  }
  for (int k = 0; k < 16; ++k) {
    for (int n = 0; n < 8; ++n) b[k][n] = static_cast<float>((k * 5 + n) % 9 - 4) / 2;
  }
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) c[r][n] = static_cast<float>(r - n);
  }
  const auto bits = [](float x) { return FloatToBf16Bits(x); };  // exact: few mantissa bits
  float d[16][8] = {};
  ASSERT_THAT(Launch(Shape(1, 32),
                     [&] {
                       const int lane = static_cast<int>(threadIdx.x);
                       const int g = lane / 4;
                       const int t = lane % 4;
                       const uint32_t a_frag[4] = {
                           PackBf16(bits(a[g][2 * t]), bits(a[g][2 * t + 1])),
                           PackBf16(bits(a[g + 8][2 * t]), bits(a[g + 8][2 * t + 1])),
                           PackBf16(bits(a[g][2 * t + 8]), bits(a[g][2 * t + 9])),
                           PackBf16(bits(a[g + 8][2 * t + 8]), bits(a[g + 8][2 * t + 9]))};
                       const uint32_t b_frag[2] = {
                           PackBf16(bits(b[2 * t][g]), bits(b[2 * t + 1][g])),
                           PackBf16(bits(b[2 * t + 8][g]), bits(b[2 * t + 9][g]))};
                       const float c_frag[4] = {c[g][2 * t], c[g][2 * t + 1], c[g + 8][2 * t],
                                                c[g + 8][2 * t + 1]};
                       float d_frag[4];
                       MmaM16N8K16Bf16(d_frag, a_frag, b_frag, c_frag);
                       d[g][2 * t] = d_frag[0];
                       d[g][2 * t + 1] = d_frag[1];
                       d[g + 8][2 * t] = d_frag[2];
                       d[g + 8][2 * t + 1] = d_frag[3];
                     }),
              IsOk());
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) {
      float expected = c[r][n];
      for (int k = 0; k < 16; ++k) expected += a[r][k] * b[k][n];
      EXPECT_EQ(d[r][n], expected) << r << "," << n;
    }
  }
}

TEST(SimtTest, WarpMmaWithExitedLanesAborts) {
  EXPECT_DEATH((void)Launch(Shape(1, 32),
                            [] {
                              if (threadIdx.x == 5) return;
                              const uint32_t a[4] = {}, b[2] = {};
                              const float c[4] = {};
                              float d[4];
                              MmaM16N8K16Bf16(d, a, b, c);
                            }),
               "mma.sync");
}

TEST(SimtTest, StaticSharedMemoryGetsWhatTheDynamicLeaves) {
  LaunchShape shape = Shape(1, 1);
  shape.dynamic_shared_bytes = 16 * 1024;
  EXPECT_THAT(Launch(shape, [] { BATON_SHARED_ARRAY(float, fits, 8 * 1024); fits[0] = 0; }),
              IsOk());
  EXPECT_DEATH((void)Launch(shape, [] { BATON_SHARED_ARRAY(float, past, 8 * 1024 + 1); past[0] = 0; }),
               "static shared memory");
}

}  // namespace
}  // namespace baton::simt
