// Shared-memory KV pools: the segment's life (created, mapped read-only elsewhere, unlinked by its
// owner, cleaned up after a SIGKILLed owner), across processes with fork.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/check.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/transfer/kv_pool_mapping.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/shm_transport.h"
#include "tests/runtime/transfer/kv_test_pattern.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using transfer_testing::BlockHoldsPattern;
using transfer_testing::FillPool;
using transfer_testing::HoldsPattern;

constexpr KvPoolShape kShape{.num_layers = 2, .num_kv_heads = 2, .head_dim = 4, .block_size = 4};
constexpr int kNumBlocks = 12;
constexpr uint32_t kSeed = 5;

bool SegmentExists(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

TEST(KvSegmentNamesTest, NamesCarryThePid) {
  EXPECT_EQ(KvSegmentName(123, 4), "/baton-kv-123-4");
  const std::string a = NewKvSegmentName();
  const std::string b = NewKvSegmentName();
  EXPECT_NE(a, b);
  EXPECT_THAT(a, ::testing::StartsWith(absl::StrCat("/baton-kv-", getpid(), "-")));
}

TEST(KvPoolShmTest, PrivatePoolHasNoSegment) {
  auto pool = KvPool::Create(kShape, kNumBlocks);
  ASSERT_THAT(pool, IsOk());
  EXPECT_EQ((*pool)->shm_name(), "");
}

TEST(KvPoolShmTest, MappingSeesTheOwnersShapeAndBytes) {
  const std::string name = NewKvSegmentName();
  auto pool = KvPool::Create(kShape, kNumBlocks, KvPoolOptions{.shm_name = name});
  ASSERT_THAT(pool, IsOk());
  EXPECT_EQ((*pool)->shm_name(), name);
  FillPool(**pool, kSeed);

  auto mapping = KvPoolMapping::Open(name);
  ASSERT_THAT(mapping, IsOk());
  EXPECT_EQ((*mapping)->shape(), kShape);
  EXPECT_EQ((*mapping)->num_blocks(), kNumBlocks);
  EXPECT_EQ((*mapping)->owner_pid(), getpid());
  EXPECT_THAT((*mapping)->CheckLive(), IsOk());
  for (BlockId b = 0; b < kNumBlocks; ++b) {
    EXPECT_TRUE(HoldsPattern((*mapping)->BlockData(b), kShape.BlockBytes(), kSeed, b));
  }
  // Writes by the owner after mapping are visible too (one shared object, not a copy).
  transfer_testing::FillBlock(**pool, 3, kSeed + 1, 3);
  EXPECT_TRUE(HoldsPattern((*mapping)->BlockData(3), kShape.BlockBytes(), kSeed + 1, 3));
}

TEST(KvPoolShmTest, SegmentIsGoneAfterTheOwnerIsDestroyed) {
  const std::string name = NewKvSegmentName();
  auto pool = KvPool::Create(kShape, kNumBlocks, KvPoolOptions{.shm_name = name});
  ASSERT_THAT(pool, IsOk());
  FillPool(**pool, kSeed);
  auto mapping = KvPoolMapping::Open(name);
  ASSERT_THAT(mapping, IsOk());
  EXPECT_TRUE(SegmentExists(name));

  pool->reset();
  EXPECT_FALSE(SegmentExists(name));
  EXPECT_THAT(KvPoolMapping::Open(name), StatusIs(absl::StatusCode::kUnavailable));
  // An existing mapping stays readable, but reports that its source is gone.
  EXPECT_TRUE(HoldsPattern((*mapping)->BlockData(0), kShape.BlockBytes(), kSeed, 0));
  EXPECT_THAT((*mapping)->CheckLive(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("removed")));
}

TEST(KvPoolShmTest, BadNamesAndDuplicatesAreRejected) {
  const std::vector<std::string> bad_names = {"/", "no-slash", "/a/b", "/" + std::string(300, 'x')};
  for (const std::string& name : bad_names) {
    EXPECT_THAT(KvPool::Create(kShape, 1, KvPoolOptions{.shm_name = name}),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << name;
  }
  const std::string name = NewKvSegmentName();
  auto first = KvPool::Create(kShape, 1, KvPoolOptions{.shm_name = name});
  ASSERT_THAT(first, IsOk());
  EXPECT_THAT(KvPool::Create(kShape, 1, KvPoolOptions{.shm_name = name}),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(SegmentExists(name));  // the failed second Create did not unlink the first's segment
}

TEST(KvPoolShmTest, ForeignOrUninitializedSegmentsAreRejected) {
  const std::string name = NewKvSegmentName();
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  // Empty: its owner has not sized it yet.
  EXPECT_THAT(KvPoolMapping::Open(name), StatusIs(absl::StatusCode::kUnavailable));
  // Sized but without the magic yet.
  ASSERT_EQ(ftruncate(fd, kKvSegmentHeaderBytes), 0);
  EXPECT_THAT(KvPoolMapping::Open(name),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not initialized")));
  // Someone else's data.
  const char garbage[] = "definitely not a KV pool";
  ASSERT_EQ(pwrite(fd, garbage, sizeof(garbage), 0), static_cast<ssize_t>(sizeof(garbage)));
  EXPECT_THAT(KvPoolMapping::Open(name), StatusIs(absl::StatusCode::kFailedPrecondition));
  close(fd);
  shm_unlink(name.c_str());
  EXPECT_THAT(KvPoolMapping::Open("bad/name"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KvPoolShmTest, TheHeaderCarriesTheDtype) {
  KvPoolShape bf16_shape = kShape;
  bf16_shape.dtype = DType::kBF16;
  const std::string name = NewKvSegmentName();
  auto pool = KvPool::Create(bf16_shape, kNumBlocks, KvPoolOptions{.shm_name = name});
  ASSERT_THAT(pool, IsOk());
  FillPool(**pool, kSeed);
  auto mapping = KvPoolMapping::Open(name);
  ASSERT_THAT(mapping, IsOk());
  EXPECT_EQ((*mapping)->shape(), bf16_shape);
  EXPECT_EQ((*mapping)->BlockBytes(), kShape.BlockBytes() / 2);
  for (BlockId b = 0; b < kNumBlocks; ++b) {
    EXPECT_TRUE(HoldsPattern((*mapping)->BlockData(b), bf16_shape.BlockBytes(), kSeed, b));
  }
}

// A segment of one f32 block whose header the test writes by hand, as another build might have.
class HandWrittenSegment {
 public:
  explicit HandWrittenSegment(uint32_t version, uint32_t dtype) : name_(NewKvSegmentName()) {
    const int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    BATON_CHECK(fd >= 0);
    BATON_CHECK(ftruncate(fd, kKvSegmentHeaderBytes + kShape.BlockBytes()) == 0);
    KvSegmentHeader header{.magic = KvSegmentHeader::kMagic,
                           .version = version,
                           .num_layers = kShape.num_layers,
                           .num_kv_heads = kShape.num_kv_heads,
                           .head_dim = kShape.head_dim,
                           .block_size = kShape.block_size,
                           .num_blocks = 1,
                           .dtype = dtype,
                           .owner_pid = getpid(),
                           .data_offset_bytes = kKvSegmentHeaderBytes,
                           .data_bytes = kShape.BlockBytes()};
    BATON_CHECK(pwrite(fd, &header, sizeof(header), 0) == static_cast<ssize_t>(sizeof(header)));
    close(fd);
  }
  ~HandWrittenSegment() { shm_unlink(name_.c_str()); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

TEST(KvPoolShmTest, UnknownDtypesAndOldVersionsAreFailedPrecondition) {
  EXPECT_THAT(KvPoolMapping::Open(HandWrittenSegment(KvSegmentHeader::kVersion, 0).name()), IsOk());
  EXPECT_THAT(KvPoolMapping::Open(HandWrittenSegment(KvSegmentHeader::kVersion, 7).name()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("unknown KV element type 7")));
  // f16 is a DType, but not one a KV pool holds.
  EXPECT_THAT(KvPoolMapping::Open(
                  HandWrittenSegment(KvSegmentHeader::kVersion, static_cast<uint32_t>(DType::kF16))
                      .name()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("unknown KV element type")));
  // Version 1 had no dtype: its segments are refused, not read as f32 or as garbage.
  EXPECT_THAT(KvPoolMapping::Open(HandWrittenSegment(1, 0).name()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("version 2")));
}

// Reads a line (the segment name) the child writes to `fd`.
std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

// Forks a child that creates a shared pool filled with the pattern, writes its name to a pipe, then
// waits until the parent closes `release_fd`'s other end (and destroys its pool) or is killed.
pid_t ForkPoolOwner(std::string* name, int* release_write_fd) {
  int names[2], release[2];
  if (pipe(names) != 0 || pipe(release) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(names[0]);
    close(release[1]);
    int code = 0;
    {
      auto pool = KvPool::Create(kShape, kNumBlocks, KvPoolOptions{.shm_name = NewKvSegmentName()});
      if (!pool.ok()) _exit(2);
      FillPool(**pool, kSeed);
      const std::string line = (*pool)->shm_name() + "\n";
      if (write(names[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) code = 3;
      char c;
      while (read(release[0], &c, 1) > 0) {
      }
    }  // the pool's destructor unlinks the segment
    _exit(code);
  }
  close(names[1]);
  close(release[0]);
  *name = ReadLine(names[0]);
  close(names[0]);
  *release_write_fd = release[1];
  return pid;
}

TEST(KvPoolShmTest, AnotherProcessPullsFromTheOwnersPool) {
  std::string name;
  int release_fd = -1;
  const pid_t child = ForkPoolOwner(&name, &release_fd);
  ASSERT_GT(child, 0);
  ASSERT_FALSE(name.empty());
  EXPECT_THAT(name, HasSubstr(absl::StrCat("-", child, "-")));

  auto dst = KvPool::Create(kShape, kNumBlocks);
  ASSERT_THAT(dst, IsOk());
  ShmTransport transport;
  KvPullSpec spec{.source = {.shm_name = name},
                  .shape = kShape,
                  .src_blocks = {7, 8, 9, 2},
                  .num_tokens = 4 * kShape.block_size};
  const std::vector<BlockId> dst_blocks = {0, 1, 2, 11};
  ASSERT_THAT(transport.Pull(spec, **dst, dst_blocks, absl::Now() + absl::Seconds(10)), IsOk());
  for (size_t i = 0; i < dst_blocks.size(); ++i) {
    EXPECT_TRUE(BlockHoldsPattern(**dst, dst_blocks[i], kSeed, spec.src_blocks[i]));
  }

  close(release_fd);  // the owner destroys its pool and exits
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
  EXPECT_FALSE(SegmentExists(name));
  EXPECT_THAT(transport.Pull(spec, **dst, dst_blocks, absl::Now() + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(transport.num_cached_mappings(), 0);
}

TEST(KvPoolShmTest, KilledOwnerIsUnavailableAndItsSegmentIsCleanedUp) {
  std::string name;
  int release_fd = -1;
  const pid_t child = ForkPoolOwner(&name, &release_fd);
  ASSERT_GT(child, 0);
  ASSERT_FALSE(name.empty());
  auto dst = KvPool::Create(kShape, kNumBlocks);
  ASSERT_THAT(dst, IsOk());
  ShmTransport transport;
  const KvPullSpec spec{
      .source = {.shm_name = name}, .shape = kShape, .src_blocks = {0}, .num_tokens = 1};
  const std::vector<BlockId> dst_blocks = {5};
  ASSERT_THAT(transport.Pull(spec, **dst, dst_blocks, absl::Now() + absl::Seconds(10)), IsOk());

  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  close(release_fd);
  EXPECT_TRUE(SegmentExists(name));  // nobody unlinked it
  EXPECT_THAT(transport.Pull(spec, **dst, dst_blocks, absl::Now() + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("has exited")));

  EXPECT_THAT(RemoveStaleKvSegments(child), absl_testing::IsOkAndHolds(1));
  EXPECT_FALSE(SegmentExists(name));
  EXPECT_THAT(RemoveStaleKvSegments(child), absl_testing::IsOkAndHolds(0));
}

TEST(KvPoolShmTest, OrphanedSegmentsAreRemovedAndLiveOnesKept) {
  std::string name;
  int release_fd = -1;
  const pid_t child = ForkPoolOwner(&name, &release_fd);
  ASSERT_GT(child, 0);
  ASSERT_FALSE(name.empty());
  auto live = KvPool::Create(kShape, 1, KvPoolOptions{.shm_name = NewKvSegmentName()});
  ASSERT_THAT(live, IsOk());
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  close(release_fd);

  auto removed = RemoveOrphanedKvSegments();
  ASSERT_THAT(removed, IsOk());
  EXPECT_GE(*removed, 1);
  EXPECT_FALSE(SegmentExists(name));
  EXPECT_TRUE(SegmentExists((*live)->shm_name()));
}

}  // namespace
}  // namespace baton::runtime
