// KV hand-off between instances that shard the model differently: every decode rank pulls its
// slabs (kv_slab_mapping.h) from the prefill ranks' pools and ends up with exactly the bytes a
// same-layout hand-off would give it; it moves exactly the bytes it owns and writes no other block.
// Every case runs over both transports: shared memory (ShmTransport, and AutoKvTransport, which
// picks it on one host) and TCP (TcpKvTransport from a real KvServer per prefill rank, and
// AutoKvTransport, which picks it for private pools); the error cases too, with the same codes.
// Every layout runs with f32 and with bf16 pools. Then TCP only: a server stopped mid-pull, and a
// rank that never answers.
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/kv_slab_mapping.h"
#include "runtime/transfer/kv_transport.h"
#include "runtime/transfer/shm_transport.h"
#include "runtime/transfer/socket_io.h"
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
using transfer_testing::KvElementBits;
using transfer_testing::LoadKvElement;
using transfer_testing::RandomBlockList;
using transfer_testing::StoreKvElement;

constexpr int kPoolBlocks = 24;
constexpr int kRequestBlocks = 9;
constexpr uint32_t kSrcGarbageSeed = 100;  // + prefill rank: blocks outside the request
constexpr uint32_t kDstSeed = 200;         // + decode rank: what the destination held before

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// The KV word of (global layer, global KV head, token, dim, K/V): what any rank holding that layer
// and head stores there after a prefill, whatever the layout.
uint32_t KvWord(int layer, int kv_head, int token, int dim, int kv) {
  const uint64_t key = (uint64_t(layer) << 44) ^ (uint64_t(kv_head) << 34) ^
                       (uint64_t(token) << 13) ^ (uint64_t(dim) << 1) ^ uint64_t(kv);
  return transfer_testing::PatternWord(7, 0, key);
}

// Calls fn(element pointer, global layer, global head, token, dim, kv) for every element of
// `block` of `pool` (a pool of `shard`), the block being request block `request_block_idx`.
template <typename Fn>
void ForEachElement(const KvPool& pool, const KvRankShard& shard, BlockId block,
                    int request_block_idx, Fn fn) {
  const KvPoolShape& s = pool.shape();
  std::byte* const data = pool.BlockData(block);
  const int64_t elem_bytes = static_cast<int64_t>(DTypeBytes(s.dtype));
  for (int l = 0; l < s.num_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int h = 0; h < s.num_kv_heads; ++h) {
        for (int slot = 0; slot < s.block_size; ++slot) {
          for (int d = 0; d < s.head_dim; ++d) {
            const int64_t idx = (((int64_t{l} * 2 + kv) * s.num_kv_heads + h) * s.block_size + slot) *
                                    s.head_dim + d;
            fn(data + idx * elem_bytes, shard.layer_begin + l, shard.kv_head_begin + h,
               request_block_idx * s.block_size + slot, d, kv);
          }
        }
      }
    }
  }
}

struct Case {
  const char* name;
  KvPoolShape model;
  ParallelLayout prefill;
  ParallelLayout decode;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

KvPoolShape Model(int num_layers, int num_kv_heads) {
  return KvPoolShape{.num_layers = num_layers, .num_kv_heads = num_kv_heads, .head_dim = 4,
                     .block_size = 4};
}

ParallelLayout L(int tp_size, int pp_size, std::vector<int> stage_num_layers = {}) {
  return ParallelLayout{.tp_size = tp_size, .pp_size = pp_size,
                  .stage_num_layers = std::move(stage_num_layers)};
}

std::vector<Case> Cases() {
  return {
      {"P_tp2_to_D_tp1", Model(4, 2), L(2, 1), L(1, 1)},
      {"P_tp1_to_D_tp2", Model(4, 2), L(1, 1), L(2, 1)},
      {"P_pp2_to_D_tp2", Model(4, 2), L(1, 2), L(2, 1)},
      {"P_tp2pp2_to_D_pp2", Model(4, 4), L(2, 2), L(1, 2)},
      {"P_tp2pp2_to_D_tp4", Model(5, 4), L(2, 2), L(4, 1)},
      {"P_pp2_uneven_to_D_pp2_other_split", Model(5, 2), L(1, 2, {1, 4}), L(1, 2, {3, 2})},
      {"P_tp4_replicated_to_D_tp1", Model(3, 2), L(4, 1), L(1, 1)},
      {"P_tp4_replicated_to_D_tp2", Model(3, 2), L(4, 1), L(2, 1)},
      {"P_tp1_to_D_tp4_replicated", Model(3, 2), L(1, 1), L(4, 1)},
      {"P_tp4pp2_replicated_to_D_tp8pp1_replicated", Model(4, 2), L(4, 2), L(8, 1)},
      {"same_layout_tp2", Model(4, 2), L(2, 1), L(2, 1)},
      {"same_layout_tp1", Model(4, 2), L(1, 1), L(1, 1)},
  };
}

// The prefill instance: one pool per rank, each holding the request's KV (the pattern) in its own
// random block list, garbage elsewhere. Over shm the pools are shared segments; over TCP they are
// private and each rank runs a KvServer (declared after the pools: it stops before they go).
struct Prefill {
  std::vector<std::unique_ptr<KvPool>> pools;
  std::vector<std::unique_ptr<KvServer>> servers;  // TCP only, one per rank
  std::vector<KvRankSource> sources;

  // Rank r goes away: its server stops (TCP), its pool (and shm segment) is freed.
  void Kill(int r) {
    if (!servers.empty()) servers[r]->Stop();
    pools[r].reset();
  }
};

Prefill MakePrefill(const Case& c, int num_tokens, std::mt19937& rng, KvTransportKind kind) {
  Prefill prefill;
  for (int r = 0; r < c.prefill.num_ranks(); ++r) {
    absl::StatusOr<KvRankShard> shard = MakeKvRankShard(c.model, c.prefill, r);
    EXPECT_THAT(shard, IsOk());
    const KvPoolOptions options{
        .shm_name = kind == KvTransportKind::kShm ? NewKvSegmentName() : std::string()};
    auto pool = KvPool::Create(shard->pool_shape, kPoolBlocks, options);
    EXPECT_THAT(pool, IsOk());
    FillPool(**pool, kSrcGarbageSeed + r);
    const int num_blocks = (num_tokens + c.model.block_size - 1) / c.model.block_size;
    std::vector<BlockId> blocks = RandomBlockList(rng, kPoolBlocks, num_blocks, BlockListKind::kMixed);
    for (int i = 0; i < num_blocks; ++i) {
      const DType dtype = shard->pool_shape.dtype;
      ForEachElement(**pool, *shard, blocks[i], i,
                     [dtype](std::byte* p, int l, int h, int t, int d, int kv) {
                       StoreKvElement(p, dtype, KvElementBits(KvWord(l, h, t, d, kv), dtype));
                     });
    }
    std::string tcp_address;
    if (kind == KvTransportKind::kTcp) {
      auto server = KvServer::Start(**pool, KvServerOptions{});
      EXPECT_THAT(server, IsOk());
      tcp_address = (*server)->address();
      prefill.servers.push_back(*std::move(server));
    }
    prefill.sources.push_back(KvRankSource{.source = LocalKvSource(**pool, tcp_address),
                                           .shape = shard->pool_shape,
                                           .src_blocks = std::move(blocks)});
    prefill.pools.push_back(*std::move(pool));
  }
  return prefill;
}

// Every element of the request's blocks in `dst` equals KvWord; every other block still holds the
// destination's own pattern.
::testing::AssertionResult HoldsRequest(const KvPool& dst, const KvRankShard& shard,
                                        std::span<const BlockId> dst_blocks, uint32_t dst_seed) {
  std::vector<int> request_idx(dst.num_blocks(), -1);
  for (size_t i = 0; i < dst_blocks.size(); ++i) request_idx[dst_blocks[i]] = static_cast<int>(i);
  for (BlockId b = 0; b < dst.num_blocks(); ++b) {
    if (request_idx[b] < 0) {
      ::testing::AssertionResult untouched = BlockHoldsPattern(dst, b, dst_seed, b);
      if (!untouched) return untouched << " (should be untouched)";
      continue;
    }
    int64_t wrong = 0;
    std::string first;
    const DType dtype = dst.shape().dtype;
    const auto check = [&](std::byte* p, int l, int h, int t, int d, int kv) {
      if (LoadKvElement(p, dtype) == KvElementBits(KvWord(l, h, t, d, kv), dtype)) return;
      if (wrong++ == 0) {
        first = absl::StrCat("layer ", l, " head ", h, " token ", t, " dim ", d, " kv ", kv);
      }
    };
    ForEachElement(dst, shard, b, request_idx[b], check);
    if (wrong > 0) {
      return ::testing::AssertionFailure() << "destination block " << b << ": " << wrong
                                           << " wrong elements, first at " << first;
    }
  }
  return ::testing::AssertionSuccess();
}

// The transports a test of one kind pulls with: that transport itself, and AutoKvTransport, which
// must pick it; and the bytes each has written into destination pools so far.
class Transports {
 public:
  explicit Transports(KvTransportKind kind) : kind_(kind) {}

  KvTransport& direct() {
    return kind_ == KvTransportKind::kShm ? static_cast<KvTransport&>(shm_) : tcp_;
  }
  std::vector<KvTransport*> all() { return {&direct(), &automatic_}; }
  int64_t bytes_moved(const KvTransport* transport) const {
    const bool is_auto = transport == &automatic_;
    return kind_ == KvTransportKind::kShm
               ? (is_auto ? automatic_.shm() : shm_).num_bytes_copied()
               : (is_auto ? automatic_.tcp() : tcp_).num_bytes_received();
  }

 private:
  const KvTransportKind kind_;
  ShmTransport shm_;
  TcpKvTransport tcp_;
  mutable AutoKvTransport automatic_;
};

std::string KindName(KvTransportKind kind) { return std::string(KvTransportKindName(kind)); }

class KvResliceTest
    : public ::testing::TestWithParam<std::tuple<Case, KvTransportKind, DType>> {};

TEST_P(KvResliceTest, EveryDecodeRankGetsExactlyTheBytesItOwns) {
  const auto& [layouts, kind, dtype] = GetParam();
  Case c = layouts;
  c.model.dtype = dtype;
  absl::StatusOr<std::vector<std::vector<KvSlab>>> plan = MapKvSlabs(c.model, c.prefill, c.decode);
  ASSERT_THAT(plan, IsOk());
  std::mt19937 rng(13);
  const int num_tokens = kRequestBlocks * c.model.block_size - 3;  // last block partial
  Prefill prefill = MakePrefill(c, num_tokens, rng, kind);
  ASSERT_FALSE(::testing::Test::HasFailure());

  Transports transports(kind);
  for (int d = 0; d < c.decode.num_ranks(); ++d) {
    SCOPED_TRACE(absl::StrCat("decode rank ", d));
    absl::StatusOr<KvRankShard> shard = MakeKvRankShard(c.model, c.decode, d);
    ASSERT_THAT(shard, IsOk());
    for (KvTransport* transport : transports.all()) {
      SCOPED_TRACE(transport->name());
      auto dst = KvPool::Create(shard->pool_shape, kPoolBlocks);
      ASSERT_THAT(dst, IsOk());
      FillPool(**dst, kDstSeed + d);
      const std::vector<BlockId> dst_blocks =
          RandomBlockList(rng, kPoolBlocks, kRequestBlocks, BlockListKind::kMixed);
      const KvPullSpec spec{.num_tokens = num_tokens,
                            .rank_sources = prefill.sources,
                            .slabs = (*plan)[d]};
      const int64_t bytes_before = transports.bytes_moved(transport);
      ASSERT_THAT(transport->Pull(spec, **dst, dst_blocks, Soon()), IsOk());
      const int64_t bytes_moved = transports.bytes_moved(transport) - bytes_before;
      EXPECT_EQ(bytes_moved, OwnedKvBytes(*shard).per_block_bytes * kRequestBlocks);
      EXPECT_EQ(bytes_moved, SlabKvBytes((*plan)[d], c.model).per_block_bytes * kRequestBlocks);
      EXPECT_TRUE(HoldsRequest(**dst, *shard, dst_blocks, kDstSeed + d));
    }
  }
  // The prefill pools were only read.
  for (int r = 0; r < c.prefill.num_ranks(); ++r) {
    const std::vector<BlockId>& blocks = prefill.sources[r].src_blocks;
    for (BlockId b = 0; b < kPoolBlocks; ++b) {
      if (std::find(blocks.begin(), blocks.end(), b) != blocks.end()) continue;
      EXPECT_TRUE(BlockHoldsPattern(*prefill.pools[r], b, kSrcGarbageSeed + r, b));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, KvResliceTest,
    ::testing::Combine(::testing::ValuesIn(Cases()),
                       ::testing::Values(KvTransportKind::kShm, KvTransportKind::kTcp),
                       ::testing::Values(DType::kF32, DType::kBF16)),
    [](const auto& info) {
      return absl::StrCat(std::get<0>(info.param).name, "_", KindName(std::get<1>(info.param)),
                          "_", std::string(DTypeName(std::get<2>(info.param))));
    });

// P(tp2) -> D(tp1), for the error paths, over either transport.
class KvResliceErrorTest : public ::testing::TestWithParam<KvTransportKind> {
 protected:
  void SetUp() override {
    std::mt19937 rng(5);
    prefill_ = MakePrefill(case_, kNumTokens, rng, GetParam());
    auto plan = MapKvSlabs(case_.model, case_.prefill, case_.decode);
    ASSERT_THAT(plan, IsOk());
    slabs_ = (*plan)[0];
    ASSERT_EQ(slabs_.size(), 2u);
    auto dst = KvPool::Create(case_.model, kPoolBlocks);
    ASSERT_THAT(dst, IsOk());
    dst_ = *std::move(dst);
    FillPool(*dst_, kDstSeed);
  }

  KvPullSpec Spec() const {
    return KvPullSpec{.num_tokens = kNumTokens, .rank_sources = prefill_.sources, .slabs = slabs_};
  }

  ::testing::AssertionResult Untouched() const {
    for (BlockId b = 0; b < kPoolBlocks; ++b) {
      ::testing::AssertionResult result = BlockHoldsPattern(*dst_, b, kDstSeed, b);
      if (!result) return result;
    }
    return ::testing::AssertionSuccess();
  }

  static constexpr int kNumTokens = 2 * 4;
  const Case case_{"P_tp2_to_D_tp1", Model(4, 2), L(2, 1), L(1, 1)};
  const std::vector<BlockId> dst_blocks_{3, 4};
  Prefill prefill_;
  std::vector<KvSlab> slabs_;
  std::unique_ptr<KvPool> dst_;
  Transports transports_{GetParam()};
  KvTransport& transport_ = transports_.direct();
};

TEST_P(KvResliceErrorTest, UncoveredOrTwiceCoveredHeadsAreInvalidArgument) {
  KvPullSpec spec = Spec();
  spec.slabs.pop_back();
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("covered by 0 slabs")));
  spec = Spec();
  spec.slabs.push_back(spec.slabs.back());
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("covered by 2 slabs")));
  EXPECT_TRUE(Untouched());
}

TEST_P(KvResliceErrorTest, MalformedSlabsAndSourcesAreInvalidArgument) {
  KvPullSpec spec = Spec();
  spec.slabs[1].src_rank_idx = 2;
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prefill rank 2")));
  spec = Spec();
  spec.slabs[1].src_kv_head_idx = 1;  // the source rank holds one head
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the source")));
  spec = Spec();
  spec.rank_sources[1].src_blocks.pop_back();
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("need 2 blocks")));
  spec = Spec();
  spec.rank_sources[1].src_blocks[0] = kPoolBlocks;
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the pool")));
  spec = Spec();
  spec.rank_sources[1].shape.head_dim = 8;
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head_dim")));
  spec = Spec();
  // Fits the slab, but not the pool's own shape (the segment's, or the one the server checks).
  spec.rank_sources[1].shape.num_layers = 5;
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pool of shape")));
  spec = Spec();
  const bool shm = GetParam() == KvTransportKind::kShm;
  (shm ? spec.rank_sources[0].source.shm_name : spec.rank_sources[0].source.tcp_address) = "";
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(shm ? "no shm segment" : "no TCP address")));
  EXPECT_THAT(transport_.Pull(Spec(), *dst_, std::vector<BlockId>{3, 3}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  EXPECT_TRUE(Untouched());
}

// The prefill pools hold f32; a bf16 destination cannot take their bytes, however the spec puts it.
TEST_P(KvResliceErrorTest, ADtypeMismatchIsInvalidArgumentNamingBothDtypes) {
  KvPoolShape bf16_model = case_.model;
  bf16_model.dtype = DType::kBF16;
  auto dst = KvPool::Create(bf16_model, kPoolBlocks);
  ASSERT_THAT(dst, IsOk());
  FillPool(**dst, kDstSeed);
  // The spec says what the sources are (f32): the slab check refuses before any source is read.
  EXPECT_THAT(transport_.Pull(Spec(), **dst, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("holds f32 elements"),
                             HasSubstr("destination holds bf16"))));
  // The spec claims bf16 sources: the sources themselves refuse (the segment's header, or the
  // KvServer's shape check).
  KvPullSpec spec = Spec();
  for (KvRankSource& source : spec.rank_sources) source.shape.dtype = DType::kBF16;
  EXPECT_THAT(transport_.Pull(spec, **dst, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dtype f32"), HasSubstr("dtype bf16"))));
  for (BlockId b = 0; b < kPoolBlocks; ++b) EXPECT_TRUE(BlockHoldsPattern(**dst, b, kDstSeed, b));
  if (GetParam() == KvTransportKind::kTcp) {
    EXPECT_EQ(prefill_.servers[0]->num_requests_served(), 0);
    EXPECT_EQ(prefill_.servers[1]->num_requests_served(), 0);
  }
}

TEST_P(KvResliceErrorTest, MalformedAddressIsInvalidArgumentBeforeAnyRankIsPulled) {
  if (GetParam() != KvTransportKind::kTcp) GTEST_SKIP() << "TCP addresses only";
  KvPullSpec spec = Spec();
  spec.rank_sources[1].source.tcp_address = "no-port";
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no-port")));
  EXPECT_TRUE(Untouched());
  EXPECT_EQ(prefill_.servers[0]->num_requests_served(), 0);
}

TEST_P(KvResliceErrorTest, PassedDeadlineAndDeadSource) {
  EXPECT_THAT(transport_.Pull(Spec(), *dst_, dst_blocks_, absl::Now() - absl::Milliseconds(1)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(Untouched());
  prefill_.Kill(1);  // the prefill rank holding head 1 goes away
  EXPECT_THAT(transport_.Pull(Spec(), *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(Untouched());
}

INSTANTIATE_TEST_SUITE_P(Transports, KvResliceErrorTest,
                         ::testing::Values(KvTransportKind::kShm, KvTransportKind::kTcp),
                         [](const auto& info) { return KindName(info.param); });

// TCP only: prefill ranks that die or stall while a decode rank pulls from them. P(tp2) -> D(tp1)
// of a request large enough (32 MiB per prefill rank) that a server is still sending when it is
// stopped.
class KvResliceTcpTest : public ::testing::Test {
 protected:
  static constexpr int kBigRequestBlocks = 512;
  const Case case_{
      "P_tp2_to_D_tp1",
      KvPoolShape{.num_layers = 8, .num_kv_heads = 2, .head_dim = 64, .block_size = 16}, L(2, 1),
      L(1, 1)};

  void SetUp() override {
    auto plan = MapKvSlabs(case_.model, case_.prefill, case_.decode);
    ASSERT_THAT(plan, IsOk());
    slabs_ = (*plan)[0];
    auto dst = KvPool::Create(case_.model, kBigRequestBlocks);
    ASSERT_THAT(dst, IsOk());
    dst_ = *std::move(dst);
    for (BlockId b = 0; b < kBigRequestBlocks; ++b) dst_blocks_.push_back(b);
  }

  // Prefill rank r: a pool of the request's blocks and a server, unless `listen_only`: then a
  // socket that listens but never accepts (the kernel queues the connection and the request).
  void AddRank(int r, bool listen_only) {
    auto shard = MakeKvRankShard(case_.model, case_.prefill, r);
    ASSERT_THAT(shard, IsOk());
    KvRankSource source{.shape = shard->pool_shape, .src_blocks = dst_blocks_};
    if (listen_only) {
      auto listener = ListenTcp("127.0.0.1", 0, 4);
      ASSERT_THAT(listener, IsOk());
      source.source.tcp_address = absl::StrCat("127.0.0.1:", LocalPort(listener->get()));
      listeners_.push_back(*std::move(listener));
    } else {
      auto pool = KvPool::Create(shard->pool_shape, kBigRequestBlocks);
      ASSERT_THAT(pool, IsOk());
      auto server = KvServer::Start(**pool, KvServerOptions{});
      ASSERT_THAT(server, IsOk());
      source.source.tcp_address = (*server)->address();
      prefill_.pools.push_back(*std::move(pool));
      prefill_.servers.push_back(*std::move(server));
    }
    prefill_.sources.push_back(std::move(source));
  }

  KvPullSpec Spec() const {
    return KvPullSpec{.num_tokens = kBigRequestBlocks * case_.model.block_size,
                      .rank_sources = prefill_.sources,
                      .slabs = slabs_};
  }

  Prefill prefill_;
  std::vector<UniqueFd> listeners_;
  std::vector<KvSlab> slabs_;
  std::vector<BlockId> dst_blocks_;
  std::unique_ptr<KvPool> dst_;
  TcpKvTransport tcp_;
};

TEST_F(KvResliceTcpTest, ServerStoppedMidPullIsUnavailable) {
  AddRank(0, /*listen_only=*/false);
  AddRank(1, /*listen_only=*/false);
  // Stop rank 1's server as soon as it has accepted the request, i.e. while it sends the payload.
  // On a loaded machine the 32 MiB may all have gone out by then: try again, a few times.
  absl::Status status;
  for (int attempt = 0; attempt < 5 && status.code() != absl::StatusCode::kUnavailable; ++attempt) {
    KvServer& server = *prefill_.servers[1];
    const int64_t served_before = server.num_requests_served();
    std::atomic<bool> done{false};
    std::thread puller([&] {
      status = tcp_.Pull(Spec(), *dst_, dst_blocks_, Soon());
      done.store(true);
    });
    while (server.num_requests_served() == served_before && !done.load()) std::this_thread::yield();
    server.Stop();
    puller.join();
    if (status.code() == absl::StatusCode::kUnavailable) break;
    ASSERT_THAT(status, IsOk()) << "attempt " << attempt;
    // The pull finished first: a fresh server for rank 1, and again.
    auto restarted = KvServer::Start(*prefill_.pools[1], KvServerOptions{});
    ASSERT_THAT(restarted, IsOk());
    prefill_.sources[1].source.tcp_address = (*restarted)->address();
    prefill_.servers[1] = *std::move(restarted);
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("closed")));
}

TEST_F(KvResliceTcpTest, RankThatNeverAnswersGivesDeadlineExceededOnTime) {
  AddRank(0, /*listen_only=*/false);
  AddRank(1, /*listen_only=*/true);
  const absl::Duration timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  EXPECT_THAT(tcp_.Pull(Spec(), *dst_, dst_blocks_, start + timeout),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, timeout - absl::Milliseconds(5));
  EXPECT_LE(elapsed, timeout + absl::Milliseconds(250));
  // Rank 0 was served in full meanwhile: the pull waited on rank 1 only.
  EXPECT_EQ(prefill_.servers[0]->num_requests_served(), 1);
}

TEST_F(KvResliceTcpTest, DeadRankCancelsTheOthersAtOnce) {
  AddRank(0, /*listen_only=*/true);  // would hold the pull until the deadline
  AddRank(1, /*listen_only=*/false);
  prefill_.servers.back()->Stop();  // rank 1's
  const absl::Time start = absl::Now();
  EXPECT_THAT(tcp_.Pull(Spec(), *dst_, dst_blocks_, start + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot connect")));
  EXPECT_LE(absl::Now() - start, absl::Seconds(1));
}

}  // namespace
}  // namespace baton::runtime
