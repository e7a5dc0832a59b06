// KV grants: the grant table itself, and a KvServer that checks them — a pull reads only the blocks
// of the live grant it presents, and a revoke cuts a send in flight and returns once it has ended.
#include "runtime/transfer/kv_grants.h"

#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/rank_pulls.h"
#include "runtime/transfer/tcp_transport.h"
#include "runtime/transfer/tcp_wire.h"
#include "tests/runtime/transfer/kv_test_pattern.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using transfer_testing::BlockHoldsPattern;
using transfer_testing::FillPool;

TEST(KvGrantsTest, AGrantIsARandomTokenThatReadsOnlyItsBlocks) {
  KvGrants grants;
  const std::vector<BlockId> blocks = {7, 3, 4, 5};
  absl::StatusOr<std::string> token = grants.Grant(blocks);
  ASSERT_THAT(token, IsOk());
  EXPECT_EQ(token->size(), KvGrants::kTokenBytes);
  absl::StatusOr<std::string> other = grants.Grant(std::vector<BlockId>{0});
  ASSERT_THAT(other, IsOk());
  EXPECT_NE(*token, *other);
  EXPECT_EQ(grants.size(), 2);

  const BlockSpan granted[] = {{.start = 3, .num_blocks = 3}, {.start = 7, .num_blocks = 1}};
  EXPECT_THAT(grants.BeginRead(*token, granted, [] {}), IsOk());
  const BlockSpan reaching_past[] = {{.start = 4, .num_blocks = 3}};  // block 6 is not granted
  EXPECT_THAT(grants.BeginRead(*token, reaching_past, [] {}),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("block 6")));
  const BlockSpan others_block[] = {{.start = 0, .num_blocks = 1}};
  EXPECT_THAT(grants.BeginRead(*token, others_block, [] {}),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(grants.BeginRead(std::string(KvGrants::kTokenBytes, '\0'), granted, [] {}),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("no live KV grant")));
}

TEST(KvGrantsTest, ARevokedGrantReadsNothing) {
  KvGrants grants;
  absl::StatusOr<std::string> token = grants.Grant(std::vector<BlockId>{1, 2});
  ASSERT_THAT(token, IsOk());
  grants.Revoke(*token);
  EXPECT_EQ(grants.size(), 0);
  const BlockSpan span[] = {{.start = 1, .num_blocks = 1}};
  EXPECT_THAT(grants.BeginRead(*token, span, [] {}),
              StatusIs(absl::StatusCode::kPermissionDenied));
  grants.Revoke(*token);  // twice, and an unknown token: no-ops
  grants.Revoke("not a token");
}

TEST(KvGrantsTest, RevokeCutsReadsInFlightAndWaitsForThem) {
  KvGrants grants;
  absl::StatusOr<std::string> token = grants.Grant(std::vector<BlockId>{0, 1});
  ASSERT_THAT(token, IsOk());
  const BlockSpan span[] = {{.start = 0, .num_blocks = 2}};
  absl::Notification cut;
  absl::StatusOr<std::unique_ptr<KvGrants::Read>> read =
      grants.BeginRead(*token, span, [&cut] { cut.Notify(); });
  ASSERT_THAT(read, IsOk());

  std::atomic<bool> revoked = false;
  std::thread revoker([&] {
    grants.Revoke(*token);
    revoked = true;
  });
  ASSERT_TRUE(cut.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // Cut, but the read has not ended: the revoke still waits, and no new read begins.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(revoked);
  EXPECT_THAT(grants.BeginRead(*token, span, [] {}),
              StatusIs(absl::StatusCode::kPermissionDenied));
  read->reset();
  revoker.join();
  EXPECT_TRUE(revoked);
  EXPECT_EQ(grants.size(), 0);
}

// A host pool behind a KvServer that checks grants.
class GrantedKvServerTest : public ::testing::Test {
 protected:
  static constexpr KvPoolShape kShape{
      .num_layers = 4, .num_kv_heads = 8, .head_dim = 128, .block_size = 16};  // 512 KiB blocks
  static constexpr int kNumBlocks = 32;
  static constexpr uint32_t kSeed = 11;

  void SetUp() override {
    auto src = KvPool::Create(kShape, kNumBlocks);
    ASSERT_THAT(src, IsOk());
    src_ = std::move(*src);
    FillPool(*src_, kSeed);
    auto dst = KvPool::Create(kShape, kNumBlocks);
    ASSERT_THAT(dst, IsOk());
    dst_ = std::move(*dst);
    auto server = KvServer::Start(*src_, KvServerOptions{.grants = &grants_});
    ASSERT_THAT(server, IsOk());
    server_ = std::move(*server);
  }

  KvPullSpec SpecFor(std::vector<BlockId> src_blocks, std::string grant) const {
    const int num_tokens = static_cast<int>(src_blocks.size()) * kShape.block_size;
    return KvPullSpec{.source = {.tcp_address = server_->address()},
                      .shape = kShape,
                      .src_blocks = std::move(src_blocks),
                      .num_tokens = num_tokens,
                      .kv_grant = std::move(grant)};
  }

  KvGrants grants_;
  std::unique_ptr<KvPool> src_;
  std::unique_ptr<KvPool> dst_;
  std::unique_ptr<KvServer> server_;  // declared last: stopped before the pool and grants go
  TcpKvTransport transport_;
};

TEST_F(GrantedKvServerTest, APullReadsTheBlocksOfTheGrantItPresentsAndNoOthers) {
  absl::StatusOr<std::string> grant = grants_.Grant(std::vector<BlockId>{4, 5, 9});
  ASSERT_THAT(grant, IsOk());
  absl::StatusOr<std::string> other = grants_.Grant(std::vector<BlockId>{6});
  ASSERT_THAT(other, IsOk());
  const std::vector<BlockId> dst_blocks = {0, 1, 2};
  const absl::Time deadline = absl::Now() + absl::Seconds(10);

  ASSERT_THAT(transport_.Pull(SpecFor({4, 5, 9}, *grant), *dst_, dst_blocks, deadline), IsOk());
  EXPECT_TRUE(BlockHoldsPattern(*dst_, 0, kSeed, 4));
  EXPECT_TRUE(BlockHoldsPattern(*dst_, 2, kSeed, 9));

  // Another request's block, no grant, someone else's grant: refused before any byte.
  EXPECT_THAT(transport_.Pull(SpecFor({4, 5, 6}, *grant), *dst_, dst_blocks, deadline),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("block 6")));
  EXPECT_THAT(transport_.Pull(SpecFor({4, 5, 9}, ""), *dst_, dst_blocks, deadline),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(transport_.Pull(SpecFor({4, 5, 9}, *other), *dst_, dst_blocks, deadline),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // Released: the blocks are no longer readable.
  grants_.Revoke(*grant);
  EXPECT_THAT(transport_.Pull(SpecFor({4, 5, 9}, *grant), *dst_, dst_blocks, deadline),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("no live KV grant")));
  EXPECT_EQ(server_->num_requests_served(), 1);
}

TEST_F(GrantedKvServerTest, ARevokeCutsASendInFlightAndReturnsOnceItEnded) {
  std::vector<BlockId> blocks(kNumBlocks);
  for (int b = 0; b < kNumBlocks; ++b) blocks[b] = b;
  absl::StatusOr<std::string> grant = grants_.Grant(blocks);
  ASSERT_THAT(grant, IsOk());
  // A client that asks for the whole pool (16 MiB, far more than the socket buffers hold) and
  // never reads: the server's send stalls mid-way, inside the grant's read.
  const IoWait wait{.deadline = absl::Now() + absl::Seconds(10)};
  absl::StatusOr<UniqueFd> fd = ConnectKvServer(server_->address(), "", wait);
  ASSERT_THAT(fd, IsOk());
  const KvWireRequest request = KvRequestHeader(kShape, *grant, kKvWireInline, 1);
  const KvWirePiece piece{.src_start = 0,
                          .num_blocks = kNumBlocks,
                          .layer_idx = 0,
                          .num_layers = kShape.num_layers,
                          .kv_head_idx = 0,
                          .num_kv_heads = kShape.num_kv_heads};
  ASSERT_THAT(SendAll(fd->get(), &request, sizeof(request), wait), IsOk());
  ASSERT_THAT(SendAll(fd->get(), &piece, sizeof(piece), wait), IsOk());
  while (server_->num_requests_served() == 0) absl::SleepFor(absl::Milliseconds(5));

  // The server's io_timeout is 30 s: only the cut can end its send this soon.
  const absl::Time start = absl::Now();
  grants_.Revoke(*grant);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(grants_.size(), 0);
  // The connection is gone: the client reads what was buffered, then the end.
  std::vector<char> sink(1 << 20);
  absl::Status drained;
  while ((drained = RecvAll(fd->get(), sink.data(), sink.size(), wait)).ok()) {
  }
  EXPECT_THAT(drained, StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace baton::runtime
