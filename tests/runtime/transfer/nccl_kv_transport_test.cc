// NcclKvTransport and the KvServer's link side, over the emulated link (the cuda-emulated device's
// NCCL, emulated_kv_link.h): pools "in device memory" are host buffers handed to KvPool as device
// storage, so the transport's and the server's whole protocol runs — the link join with the id
// made by the server, the over-link requests, the span order, the link pool — without a GPU.
#include "runtime/transfer/nccl_kv_transport.h"

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/emulated_kv_link.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/kv_slab_mapping.h"
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
using transfer_testing::BlockListKind;
using transfer_testing::FillPool;
using transfer_testing::PulledExactly;
using transfer_testing::RandomBlockList;

constexpr KvPoolShape kShape{.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .block_size = 4};
constexpr int kNumBlocks = 16;
constexpr uint32_t kSrcSeed = 3;
constexpr uint32_t kDstSeed = 9;
constexpr std::string_view kLink = "nccl-emulated";

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// A pool whose blocks live in "device" storage: host memory the test owns, as the emulated
// device's memory is.
struct DevicePool {
  DevicePool(const KvPoolShape& shape, int num_blocks)
      : storage(shape.BlockBytes() * num_blocks) {
    auto created = KvPool::Create(shape, num_blocks, KvPoolOptions{.device_storage = storage.data()});
    EXPECT_THAT(created, IsOk());
    pool = *std::move(created);
  }
  std::vector<std::byte> storage;
  std::unique_ptr<KvPool> pool;
};

// One prefill rank: a device pool served by a KvServer over emulated links.
struct PrefillRank {
  explicit PrefillRank(const KvPoolShape& shape, uint32_t seed, KvServerOptions options = {})
      : pool(shape, kNumBlocks) {
    FillPool(*pool.pool, seed);
    options.link_factory = &links;
    auto started = KvServer::Start(*pool.pool, options);
    EXPECT_THAT(started, IsOk());
    server = *std::move(started);
  }
  KvSource source() const {
    return LocalKvSource(*pool.pool, server->address(), std::string(kLink));
  }

  EmulatedKvLinkFactory links;
  DevicePool pool;
  std::unique_ptr<KvServer> server;  // declared last: stops before the pool goes
};

KvPullSpec SameLayoutSpec(const PrefillRank& rank, std::vector<BlockId> src_blocks) {
  const int num_tokens = static_cast<int>(src_blocks.size()) * kShape.block_size - 1;
  return KvPullSpec{.source = rank.source(),
                    .shape = kShape,
                    .src_blocks = std::move(src_blocks),
                    .num_tokens = num_tokens};
}

class NcclKvTransportTest : public ::testing::Test {
 protected:
  EmulatedKvLinkFactory decode_links_;
  NcclKvTransport transport_{&decode_links_};
  std::mt19937 rng_{7};
};

TEST_F(NcclKvTransportTest, SameLayoutPullsMoveExactlyTheBlocksAndReuseOneLink) {
  PrefillRank prefill(kShape, kSrcSeed);
  DevicePool dst(kShape, kNumBlocks);
  for (BlockListKind kind :
       {BlockListKind::kContiguous, BlockListKind::kScattered, BlockListKind::kMixed}) {
    FillPool(*dst.pool, kDstSeed);
    const std::vector<BlockId> src = RandomBlockList(rng_, kNumBlocks, 6, kind);
    const std::vector<BlockId> dst_blocks = RandomBlockList(rng_, kNumBlocks, 6, kind);
    ASSERT_THAT(transport_.Pull(SameLayoutSpec(prefill, src), *dst.pool, dst_blocks, Soon()),
                IsOk());
    EXPECT_TRUE(PulledExactly(*dst.pool, kDstSeed, src, dst_blocks, kSrcSeed));
  }
  // One link, joined once on each side, kept warm between pulls.
  EXPECT_EQ(transport_.num_links_joined(), 1);
  EXPECT_EQ(prefill.server->num_links_joined(), 1);
  EXPECT_EQ(transport_.num_idle_links(), 1);
  EXPECT_EQ(transport_.num_bytes_received(), 3 * 6 * static_cast<int64_t>(kShape.BlockBytes()));
}

// Prefill tp 2 (each rank one KV head) into a decode tp 1 of `model`: two prefill ranks, two
// links; the destination ends up byte for byte as a TCP pull of the same sources leaves it.
void ExpectReslicedPullGivesTheBytesTheTcpTransportGives(NcclKvTransport& transport,
                                                         std::mt19937& rng,
                                                         const KvPoolShape& model) {
  const ParallelLayout prefill_layout{.tp_size = 2, .pp_size = 1};
  const ParallelLayout decode_layout{.tp_size = 1, .pp_size = 1};
  auto plan = MapKvSlabs(model, prefill_layout, decode_layout);
  ASSERT_THAT(plan, IsOk());
  std::vector<std::unique_ptr<PrefillRank>> ranks;
  std::vector<std::unique_ptr<KvPool>> host_pools;  // the same bytes, for the TCP reference
  std::vector<std::unique_ptr<KvServer>> host_servers;
  KvPullSpec link_spec{.num_tokens = 5 * model.block_size};
  KvPullSpec tcp_spec = link_spec;
  for (int r = 0; r < 2; ++r) {
    auto shard = MakeKvRankShard(model, prefill_layout, r);
    ASSERT_THAT(shard, IsOk());
    ranks.push_back(std::make_unique<PrefillRank>(shard->pool_shape, kSrcSeed + r));
    auto host = KvPool::Create(shard->pool_shape, kNumBlocks);
    ASSERT_THAT(host, IsOk());
    FillPool(**host, kSrcSeed + r);
    auto server = KvServer::Start(**host, KvServerOptions{});
    ASSERT_THAT(server, IsOk());
    const std::vector<BlockId> blocks = RandomBlockList(rng, kNumBlocks, 5, BlockListKind::kMixed);
    link_spec.rank_sources.push_back(
        {.source = ranks[r]->source(), .shape = shard->pool_shape, .src_blocks = blocks});
    tcp_spec.rank_sources.push_back({.source = LocalKvSource(**host, (*server)->address()),
                                     .shape = shard->pool_shape,
                                     .src_blocks = blocks});
    host_pools.push_back(*std::move(host));
    host_servers.push_back(*std::move(server));
  }
  link_spec.slabs = tcp_spec.slabs = (*plan)[0];

  DevicePool dst(model, kNumBlocks);
  auto reference = KvPool::Create(model, kNumBlocks);
  ASSERT_THAT(reference, IsOk());
  FillPool(*dst.pool, kDstSeed);
  FillPool(**reference, kDstSeed);
  const std::vector<BlockId> dst_blocks = RandomBlockList(rng, kNumBlocks, 5, BlockListKind::kMixed);
  ASSERT_THAT(transport.Pull(link_spec, *dst.pool, dst_blocks, Soon()), IsOk());
  TcpKvTransport tcp;
  ASSERT_THAT(tcp.Pull(tcp_spec, **reference, dst_blocks, Soon()), IsOk());
  EXPECT_EQ(std::memcmp(dst.pool->BlockData(0), (*reference)->BlockData(0),
                        model.BlockBytes() * kNumBlocks),
            0);
  EXPECT_EQ(transport.num_links_joined(), 2);
  EXPECT_EQ(transport.num_bytes_received(), tcp.num_bytes_received());
  EXPECT_EQ(tcp.num_bytes_received(), 5 * static_cast<int64_t>(model.BlockBytes()));
}

TEST_F(NcclKvTransportTest, ReslicedPullGivesTheBytesTheTcpTransportGives) {
  ExpectReslicedPullGivesTheBytesTheTcpTransportGives(
      transport_, rng_,
      KvPoolShape{.num_layers = 3, .num_kv_heads = 2, .head_dim = 4, .block_size = 4});
}

// bf16 with head_dim 3 x block_size 3: one head of one layer is 18 bytes, so the link's spans are
// not whole 4-byte words (nothing on the way may assume f32 elements).
TEST_F(NcclKvTransportTest, ABf16ReslicedPullGivesTheBytesTheTcpTransportGives) {
  ExpectReslicedPullGivesTheBytesTheTcpTransportGives(
      transport_, rng_,
      KvPoolShape{.num_layers = 3, .num_kv_heads = 2, .head_dim = 3, .block_size = 3,
                  .dtype = DType::kBF16});
}

TEST_F(NcclKvTransportTest, Bf16SameLayoutPullsMoveExactlyTheBlocks) {
  KvPoolShape bf16 = kShape;
  bf16.dtype = DType::kBF16;
  PrefillRank prefill(bf16, kSrcSeed);
  DevicePool dst(bf16, kNumBlocks);
  FillPool(*dst.pool, kDstSeed);
  const std::vector<BlockId> src = RandomBlockList(rng_, kNumBlocks, 7, BlockListKind::kMixed);
  const std::vector<BlockId> dst_blocks =
      RandomBlockList(rng_, kNumBlocks, 7, BlockListKind::kMixed);
  KvPullSpec spec = SameLayoutSpec(prefill, src);
  spec.shape = bf16;
  ASSERT_THAT(transport_.Pull(spec, *dst.pool, dst_blocks, Soon()), IsOk());
  EXPECT_TRUE(PulledExactly(*dst.pool, kDstSeed, src, dst_blocks, kSrcSeed));
  EXPECT_EQ(transport_.num_bytes_received(), 7 * static_cast<int64_t>(bf16.BlockBytes()));
}

TEST_F(NcclKvTransportTest, AWarmLinkTheServerClosedIsReplacedOnce) {
  PrefillRank prefill(kShape, kSrcSeed, KvServerOptions{.io_timeout = absl::Milliseconds(100)});
  DevicePool dst(kShape, kNumBlocks);
  FillPool(*dst.pool, kDstSeed);
  const std::vector<BlockId> src = {1, 2, 3};
  const std::vector<BlockId> dst_blocks = {4, 5, 6};
  ASSERT_THAT(transport_.Pull(SameLayoutSpec(prefill, src), *dst.pool, dst_blocks, Soon()), IsOk());
  absl::SleepFor(absl::Milliseconds(400));  // the server closes the idle connection and its link
  ASSERT_THAT(transport_.Pull(SameLayoutSpec(prefill, src), *dst.pool, dst_blocks, Soon()), IsOk());
  EXPECT_TRUE(PulledExactly(*dst.pool, kDstSeed, src, dst_blocks, kSrcSeed));
  EXPECT_EQ(transport_.num_links_joined(), 2);
}

TEST_F(NcclKvTransportTest, TheLinkPoolKeepsOnlyTheMostRecentlyUsedLinks) {
  NcclKvTransport transport(&decode_links_, NcclKvTransportOptions{.max_idle_links = 1});
  PrefillRank a(kShape, kSrcSeed);
  PrefillRank b(kShape, kSrcSeed);
  DevicePool dst(kShape, kNumBlocks);
  const std::vector<BlockId> blocks = {0, 1};
  for (const PrefillRank* rank : {&a, &b, &a}) {
    ASSERT_THAT(transport.Pull(SameLayoutSpec(*rank, blocks), *dst.pool, blocks, Soon()), IsOk());
  }
  EXPECT_EQ(transport.num_links_joined(), 3);  // a's first link was evicted by b's
  EXPECT_EQ(transport.num_idle_links(), 1);
}

TEST_F(NcclKvTransportTest, AServerRefusesLinksBeyondItsLimit) {
  PrefillRank prefill(kShape, kSrcSeed, KvServerOptions{.max_links = 1});
  DevicePool dst(kShape, kNumBlocks);
  const std::vector<BlockId> blocks = {0, 1};
  ASSERT_THAT(transport_.Pull(SameLayoutSpec(prefill, blocks), *dst.pool, blocks, Soon()), IsOk());
  // The first transport keeps its link warm; a second decode side cannot have another.
  NcclKvTransport other(&decode_links_);
  EXPECT_THAT(other.Pull(SameLayoutSpec(prefill, blocks), *dst.pool, blocks, Soon()),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("1 KV links open")));
}

TEST_F(NcclKvTransportTest, MismatchedPoolsAndSourcesAreInvalidArgument) {
  PrefillRank prefill(kShape, kSrcSeed);
  const std::vector<BlockId> blocks = {0, 1};
  auto host_dst = KvPool::Create(kShape, kNumBlocks);
  ASSERT_THAT(host_dst, IsOk());
  EXPECT_THAT(transport_.Pull(SameLayoutSpec(prefill, blocks), **host_dst, blocks, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host memory")));

  DevicePool dst(kShape, kNumBlocks);
  KvPullSpec host_source = SameLayoutSpec(prefill, blocks);
  host_source.source.kv_link = "";
  EXPECT_THAT(transport_.Pull(host_source, *dst.pool, blocks, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("same kind of device")));
  // The shape is checked by the server before it joins a link.
  KvPullSpec other_shape = SameLayoutSpec(prefill, blocks);
  other_shape.shape.head_dim = 16;
  DevicePool wide(other_shape.shape, kNumBlocks);
  EXPECT_THAT(transport_.Pull(other_shape, *wide.pool, blocks, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("this pool is")));
  // So is the element type: a bf16 decode pool cannot take an f32 prefill pool's bytes.
  KvPullSpec bf16 = SameLayoutSpec(prefill, blocks);
  bf16.shape.dtype = DType::kBF16;
  DevicePool bf16_dst(bf16.shape, kNumBlocks);
  EXPECT_THAT(transport_.Pull(bf16, *bf16_dst.pool, blocks, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dtype bf16) but this pool is"), HasSubstr("dtype f32)"))));
  EXPECT_EQ(prefill.server->num_links_joined(), 0);
}

TEST_F(NcclKvTransportTest, HostAndDevicePoolsRefuseTheOtherSidesProtocol) {
  // A host pool's server has no links.
  auto host_pool = KvPool::Create(kShape, kNumBlocks);
  ASSERT_THAT(host_pool, IsOk());
  auto host_server = KvServer::Start(**host_pool, KvServerOptions{});
  ASSERT_THAT(host_server, IsOk());
  DevicePool dst(kShape, kNumBlocks);
  KvPullSpec spec{.source = LocalKvSource(**host_pool, (*host_server)->address(), "nccl-emulated"),
                  .shape = kShape,
                  .src_blocks = {0},
                  .num_tokens = 1};
  EXPECT_THAT(transport_.Pull(spec, *dst.pool, std::vector<BlockId>{0}, Soon()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("host memory")));
  // A device pool's server sends nothing inline.
  PrefillRank prefill(kShape, kSrcSeed);
  TcpKvTransport tcp;
  spec.source = prefill.source();
  EXPECT_THAT(tcp.Pull(spec, **host_pool, std::vector<BlockId>{0}, Soon()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("device memory")));
  // And the automatic transport of a host worker refuses a device source before connecting.
  AutoKvTransport automatic;
  EXPECT_THAT(automatic.Pull(spec, **host_pool, std::vector<BlockId>{0}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("same kind of device")));
}

TEST_F(NcclKvTransportTest, AStoppedServerIsUnavailable) {
  auto prefill = std::make_unique<PrefillRank>(kShape, kSrcSeed);
  const KvPullSpec spec = SameLayoutSpec(*prefill, {0, 1});
  prefill->server->Stop();
  DevicePool dst(kShape, kNumBlocks);
  EXPECT_THAT(transport_.Pull(spec, *dst.pool, std::vector<BlockId>{2, 3}, Soon()),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(NcclKvTransportTest, AutoTransportOfADeviceWorkerPullsOverLinks) {
  absl::StatusOr<std::unique_ptr<KvTransport>> automatic = MakeKvTransport(kLink);
  ASSERT_THAT(automatic, IsOk());
  PrefillRank prefill(kShape, kSrcSeed);
  DevicePool dst(kShape, kNumBlocks);
  FillPool(*dst.pool, kDstSeed);
  const std::vector<BlockId> src = {5, 6, 9};
  const std::vector<BlockId> dst_blocks = {0, 1, 2};
  ASSERT_THAT((*automatic)->Pull(SameLayoutSpec(prefill, src), *dst.pool, dst_blocks, Soon()),
              IsOk());
  EXPECT_TRUE(PulledExactly(*dst.pool, kDstSeed, src, dst_blocks, kSrcSeed));
  EXPECT_THAT(MakeKvTransport("carrier-pigeon"), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A decode worker's pool size (the deployment's kv_link_pool_size) reaches its links' pool.
TEST_F(NcclKvTransportTest, AutoTransportKeepsAsManyLinksAsItIsGiven) {
  absl::StatusOr<std::unique_ptr<KvTransport>> automatic =
      MakeKvTransport(kLink, "127.0.0.1", "", /*max_idle_links=*/1);
  ASSERT_THAT(automatic, IsOk());
  NcclKvTransport* links = static_cast<AutoKvTransport&>(**automatic).links();
  ASSERT_NE(links, nullptr);
  PrefillRank a(kShape, kSrcSeed);
  PrefillRank b(kShape, kSrcSeed);
  DevicePool dst(kShape, kNumBlocks);
  const std::vector<BlockId> blocks = {0, 1};
  for (const PrefillRank* rank : {&a, &b, &a}) {
    ASSERT_THAT((*automatic)->Pull(SameLayoutSpec(*rank, blocks), *dst.pool, blocks, Soon()),
                IsOk());
  }
  EXPECT_EQ(links->num_links_joined(), 3);  // a's first link was evicted by b's
  EXPECT_EQ(links->num_idle_links(), 1);
}

}  // namespace
}  // namespace baton::runtime
