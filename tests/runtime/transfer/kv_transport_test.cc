// The KvTransport contract, checked for every host transport (shm, tcp, and auto, which picks shm
// here) against the same source pool: exact bytes, untouched neighbours, validation, deadlines and
// a source that goes away.
#include "runtime/transfer/kv_transport.h"

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/shm_transport.h"
#include "runtime/transfer/tcp_transport.h"
#include "runtime/transfer/transport_factory.h"
#include "tests/runtime/transfer/kv_test_pattern.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using transfer_testing::BlockHoldsPattern;
using transfer_testing::BlockListKind;
using transfer_testing::FillPool;
using transfer_testing::PulledExactly;
using transfer_testing::RandomBlockList;

constexpr KvPoolShape kShape{.num_layers = 3, .num_kv_heads = 2, .head_dim = 8, .block_size = 4};
constexpr int kNumSrcBlocks = 64;
constexpr int kNumDstBlocks = 80;
constexpr uint32_t kSrcSeed = 11;
constexpr uint32_t kDstSeed = 22;

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

class KvTransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto src = KvPool::Create(kShape, kNumSrcBlocks, KvPoolOptions{.shm_name = NewKvSegmentName()});
    ASSERT_THAT(src, IsOk());
    src_ = std::move(*src);
    FillPool(*src_, kSrcSeed);
    auto server = KvServer::Start(*src_, KvServerOptions{});
    ASSERT_THAT(server, IsOk());
    server_ = std::move(*server);
    auto dst = KvPool::Create(kShape, kNumDstBlocks);
    ASSERT_THAT(dst, IsOk());
    dst_ = std::move(*dst);
    FillPool(*dst_, kDstSeed);
    if (GetParam() == "shm") transport_ = std::make_unique<ShmTransport>();
    if (GetParam() == "tcp") transport_ = std::make_unique<TcpKvTransport>();
    if (GetParam() == "auto") transport_ = *MakeKvTransport();
    ASSERT_NE(transport_, nullptr);
  }

  KvPullSpec Spec(std::vector<BlockId> src_blocks, int num_tokens = -1) const {
    const int tokens =
        num_tokens >= 0 ? num_tokens : static_cast<int>(src_blocks.size()) * kShape.block_size;
    return KvPullSpec{.source = LocalKvSource(*src_, server_->address()),
                      .shape = kShape,
                      .src_blocks = std::move(src_blocks),
                      .num_tokens = tokens};
  }

  // Makes the source unreachable the way a dead prefill worker would.
  void KillSource() {
    server_->Stop();
    src_.reset();
  }

  std::unique_ptr<KvPool> src_;
  std::unique_ptr<KvServer> server_;
  std::unique_ptr<KvPool> dst_;
  std::unique_ptr<KvTransport> transport_;
};

TEST_P(KvTransportTest, PullsRandomBlockListsExactly) {
  std::mt19937 rng(1234);
  const BlockListKind kinds[] = {BlockListKind::kContiguous, BlockListKind::kScattered,
                                 BlockListKind::kMixed};
  for (int trial = 0; trial < 24; ++trial) {
    FillPool(*dst_, kDstSeed);
    const BlockListKind src_kind = kinds[trial % 3];
    const BlockListKind dst_kind = kinds[(trial / 3) % 3];
    const int count = std::uniform_int_distribution<int>(1, 40)(rng);
    const std::vector<BlockId> src = RandomBlockList(rng, kNumSrcBlocks, count, src_kind);
    const std::vector<BlockId> dst = RandomBlockList(rng, kNumDstBlocks, count, dst_kind);
    // Partial last block: any token count that needs exactly `count` blocks.
    const int num_tokens = (count - 1) * kShape.block_size +
                           std::uniform_int_distribution<int>(1, kShape.block_size)(rng);
    ASSERT_THAT(transport_->Pull(Spec(src, num_tokens), *dst_, dst, Soon()), IsOk())
        << "trial " << trial;
    ASSERT_TRUE(PulledExactly(*dst_, kDstSeed, src, dst, kSrcSeed)) << "trial " << trial;
  }
}

TEST_P(KvTransportTest, PullsOneContiguousRequestIntoOtherIds) {
  std::vector<BlockId> src, dst;
  for (int i = 0; i < 20; ++i) {
    src.push_back(10 + i);
    dst.push_back(55 + i);
  }
  ASSERT_THAT(transport_->Pull(Spec(src), *dst_, dst, Soon()), IsOk());
  EXPECT_TRUE(PulledExactly(*dst_, kDstSeed, src, dst, kSrcSeed));
}

TEST_P(KvTransportTest, ZeroTokensIsANoOp) {
  ASSERT_THAT(transport_->Pull(Spec({}, 0), *dst_, {}, Soon()), IsOk());
  EXPECT_TRUE(PulledExactly(*dst_, kDstSeed, {}, {}, kSrcSeed));
}

TEST_P(KvTransportTest, ConcurrentPullsIntoDisjointBlocks) {
  std::vector<BlockId> src_a, dst_a, src_b, dst_b;
  for (int i = 0; i < 16; ++i) {
    src_a.push_back(i);
    dst_a.push_back(2 * i);
    src_b.push_back(63 - i);
    dst_b.push_back(2 * i + 1);
  }
  absl::Status status_b;
  std::thread other([&] { status_b = transport_->Pull(Spec(src_b), *dst_, dst_b, Soon()); });
  const absl::Status status_a = transport_->Pull(Spec(src_a), *dst_, dst_a, Soon());
  other.join();
  ASSERT_THAT(status_a, IsOk());
  ASSERT_THAT(status_b, IsOk());
  std::vector<BlockId> src = src_a, dst = dst_a;
  src.insert(src.end(), src_b.begin(), src_b.end());
  dst.insert(dst.end(), dst_b.begin(), dst_b.end());
  EXPECT_TRUE(PulledExactly(*dst_, kDstSeed, src, dst, kSrcSeed));
}

TEST_P(KvTransportTest, ShapeMismatchWithTheDestinationIsInvalidArgument) {
  KvPullSpec spec = Spec({0, 1});
  spec.shape.num_kv_heads = 4;
  EXPECT_THAT(transport_->Pull(spec, *dst_, std::vector<BlockId>{0, 1}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("re-slice")));
  EXPECT_TRUE(PulledExactly(*dst_, kDstSeed, {}, {}, kSrcSeed));
}

TEST_P(KvTransportTest, ShapeMismatchWithTheSourcePoolIsInvalidArgument) {
  // The spec and the destination agree, but the source pool has another head_dim.
  KvPoolShape other_shape = kShape;
  other_shape.head_dim = 16;
  auto other = KvPool::Create(other_shape, 8, KvPoolOptions{.shm_name = NewKvSegmentName()});
  ASSERT_THAT(other, IsOk());
  auto other_server = KvServer::Start(**other, KvServerOptions{});
  ASSERT_THAT(other_server, IsOk());
  KvPullSpec spec = Spec({0, 1});
  spec.source = LocalKvSource(**other, (*other_server)->address());
  EXPECT_THAT(transport_->Pull(spec, *dst_, std::vector<BlockId>{0, 1}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head_dim 16")));
  EXPECT_TRUE(PulledExactly(*dst_, kDstSeed, {}, {}, kSrcSeed));
}

constexpr KvPoolShape kBf16Shape{
    .num_layers = 3, .num_kv_heads = 2, .head_dim = 8, .block_size = 4, .dtype = DType::kBF16};

TEST_P(KvTransportTest, Bf16PoolsArriveBitExact) {
  auto src =
      KvPool::Create(kBf16Shape, kNumSrcBlocks, KvPoolOptions{.shm_name = NewKvSegmentName()});
  ASSERT_THAT(src, IsOk());
  FillPool(**src, kSrcSeed);
  auto server = KvServer::Start(**src, KvServerOptions{});
  ASSERT_THAT(server, IsOk());
  auto dst = KvPool::Create(kBf16Shape, kNumDstBlocks);
  ASSERT_THAT(dst, IsOk());
  ASSERT_EQ((*dst)->BlockBytes() * 2, dst_->BlockBytes());
  std::mt19937 rng(99);
  for (int trial = 0; trial < 6; ++trial) {
    FillPool(**dst, kDstSeed);
    const int count = std::uniform_int_distribution<int>(1, 40)(rng);
    const std::vector<BlockId> src_blocks =
        RandomBlockList(rng, kNumSrcBlocks, count, BlockListKind::kMixed);
    const std::vector<BlockId> dst_blocks =
        RandomBlockList(rng, kNumDstBlocks, count, BlockListKind::kMixed);
    const KvPullSpec spec{.source = LocalKvSource(**src, (*server)->address()),
                          .shape = kBf16Shape,
                          .src_blocks = src_blocks,
                          .num_tokens = count * kBf16Shape.block_size - 1};
    ASSERT_THAT(transport_->Pull(spec, **dst, dst_blocks, Soon()), IsOk()) << "trial " << trial;
    ASSERT_TRUE(PulledExactly(**dst, kDstSeed, src_blocks, dst_blocks, kSrcSeed))
        << "trial " << trial;
  }
}

TEST_P(KvTransportTest, DtypeMismatchWithTheDestinationIsInvalidArgumentNamingBoth) {
  auto dst = KvPool::Create(kBf16Shape, kNumDstBlocks);
  ASSERT_THAT(dst, IsOk());
  FillPool(**dst, kDstSeed);
  EXPECT_THAT(transport_->Pull(Spec({0, 1}), **dst, std::vector<BlockId>{0, 1}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dtype f32"), HasSubstr("dtype bf16"))));
  EXPECT_TRUE(PulledExactly(**dst, kDstSeed, {}, {}, kSrcSeed));
}

TEST_P(KvTransportTest, DtypeMismatchWithTheSourcePoolIsInvalidArgumentNamingBoth) {
  // The spec and the destination say bf16, but the source pool holds f32: its segment header
  // (shm) or its KvServer (tcp) says so.
  auto dst = KvPool::Create(kBf16Shape, kNumDstBlocks);
  ASSERT_THAT(dst, IsOk());
  FillPool(**dst, kDstSeed);
  KvPullSpec spec = Spec({0, 1});
  spec.shape = kBf16Shape;
  EXPECT_THAT(transport_->Pull(spec, **dst, std::vector<BlockId>{0, 1}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dtype f32"), HasSubstr("dtype bf16"))));
  EXPECT_TRUE(PulledExactly(**dst, kDstSeed, {}, {}, kSrcSeed));
  EXPECT_EQ(server_->num_requests_served(), 0);
}

TEST_P(KvTransportTest, MalformedSpecsAreInvalidArgument) {
  const std::vector<BlockId> two = {0, 1};
  // Block count does not match num_tokens.
  EXPECT_THAT(transport_->Pull(Spec({0, 1}, 9), *dst_, two, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("need 3 blocks")));
  // Source and destination lists differ in length.
  EXPECT_THAT(transport_->Pull(Spec({0, 1}), *dst_, std::vector<BlockId>{0}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("destination blocks")));
  // Destination out of range, or repeated.
  EXPECT_THAT(transport_->Pull(Spec({0, 1}), *dst_, std::vector<BlockId>{0, kNumDstBlocks}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the pool")));
  EXPECT_THAT(transport_->Pull(Spec({0, 1}), *dst_, std::vector<BlockId>{3, 3}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  // Source out of range (checked against the source pool by the transport).
  EXPECT_THAT(transport_->Pull(Spec({0, kNumSrcBlocks}), *dst_, two, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the pool")));
  EXPECT_THAT(transport_->Pull(Spec({-1, 0}), *dst_, two, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(PulledExactly(*dst_, kDstSeed, {}, {}, kSrcSeed));
}

TEST_P(KvTransportTest, PassedDeadlineIsDeadlineExceeded) {
  EXPECT_THAT(transport_->Pull(Spec({0, 1}), *dst_, std::vector<BlockId>{0, 1},
                               absl::Now() - absl::Milliseconds(1)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_P(KvTransportTest, DeadSourceIsUnavailable) {
  const KvPullSpec spec = Spec({0, 1});
  ASSERT_THAT(transport_->Pull(spec, *dst_, std::vector<BlockId>{0, 1}, Soon()), IsOk());
  KillSource();
  EXPECT_THAT(transport_->Pull(spec, *dst_, std::vector<BlockId>{2, 3}, Soon()),
              StatusIs(absl::StatusCode::kUnavailable));
}

INSTANTIATE_TEST_SUITE_P(HostTransports, KvTransportTest, ::testing::Values("shm", "tcp", "auto"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace baton::runtime
