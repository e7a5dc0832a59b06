#include "runtime/model/huge_page_arena.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

TEST(HugePageArenaTest, AllocationsAreAlignedDisjointAndWritable) {
  HugePageArena arena;
  // Odd sizes, one larger than a chunk, so that allocations share a chunk and open new ones.
  const std::vector<size_t> sizes = {1, 100, 3 << 20, HugePageArena::kChunkBytes + 12345, 77, 5 << 20};
  std::vector<std::byte*> blocks;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::byte* p = arena.Allocate(sizes[i]);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % HugePageArena::kAlignment, 0u);
    std::memset(p, static_cast<int>(i + 1), sizes[i]);
    blocks.push_back(p);
  }
  // No allocation overwrote another.
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(blocks[i][0], std::byte(i + 1));
    EXPECT_EQ(blocks[i][sizes[i] - 1], std::byte(i + 1));
  }
  EXPECT_GE(arena.num_mapped_bytes(), HugePageArena::kChunkBytes + 12345);
  EXPECT_EQ(arena.num_mapped_bytes() % HugePageArena::kHugePageBytes, 0u);
}

TEST(HugePageArenaTest, MoveTransfersTheChunksAndClearReleasesThem) {
  HugePageArena a;
  std::byte* p = a.Allocate(1000);
  ASSERT_NE(p, nullptr);
  p[999] = std::byte{42};
  HugePageArena b = std::move(a);
  EXPECT_EQ(a.num_mapped_bytes(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.num_mapped_bytes(), HugePageArena::kChunkBytes);
  EXPECT_EQ(p[999], std::byte{42});  // still mapped, now owned by b
  b.Clear();
  EXPECT_EQ(b.num_mapped_bytes(), 0u);
  EXPECT_NE(b.Allocate(8), nullptr);  // usable after Clear
}

}  // namespace
}  // namespace baton::runtime
