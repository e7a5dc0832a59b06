// Transport selection: shared memory for a source on this host whose segment maps, TCP otherwise.
#include "runtime/transfer/transport_factory.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/kv_server.h"
#include "tests/runtime/transfer/kv_test_pattern.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::IsOkAndHolds;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using transfer_testing::FillPool;
using transfer_testing::PulledExactly;

constexpr KvPoolShape kShape{.num_layers = 2, .num_kv_heads = 1, .head_dim = 4, .block_size = 2};

TEST(IsSameHostTest, NeedsHostnameAndBootId) {
  const HostIdentity local{.hostname = "node-a", .boot_id = "boot-1"};
  struct Case {
    const char* hostname;
    const char* boot_id;
    bool same;
  };
  for (const Case& c : std::vector<Case>{{"node-a", "boot-1", true},
                                         {"node-b", "boot-1", false},  // cloned VM, other name
                                         {"node-a", "boot-2", false},  // container with same name
                                         {"node-a", "", false},        // unknown boot id
                                         {"", "boot-1", false}}) {
    EXPECT_EQ(IsSameHost(KvSource{.hostname = c.hostname, .boot_id = c.boot_id}, local), c.same)
        << c.hostname << " " << c.boot_id;
  }
  EXPECT_FALSE(IsSameHost(KvSource{}, HostIdentity{}));
}

TEST(LocalHostIdentityTest, ReadsThisMachine) {
  const HostIdentity& local = LocalHostIdentity();
  EXPECT_FALSE(local.hostname.empty());
  EXPECT_EQ(local.boot_id.size(), 36u);  // a UUID
}

class TransportFactoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto src = KvPool::Create(kShape, 8, KvPoolOptions{.shm_name = NewKvSegmentName()});
    ASSERT_THAT(src, IsOk());
    src_ = std::move(*src);
    FillPool(*src_, 1);
    auto server = KvServer::Start(*src_, KvServerOptions{});
    ASSERT_THAT(server, IsOk());
    server_ = std::move(*server);
    auto dst = KvPool::Create(kShape, 8);
    ASSERT_THAT(dst, IsOk());
    dst_ = std::move(*dst);
    FillPool(*dst_, 2);
  }

  std::unique_ptr<KvPool> src_;
  std::unique_ptr<KvServer> server_;
  std::unique_ptr<KvPool> dst_;
};

TEST_F(TransportFactoryTest, LocalKvSourceDescribesThisPool) {
  const KvSource source = LocalKvSource(*src_, server_->address());
  EXPECT_EQ(source.hostname, LocalHostIdentity().hostname);
  EXPECT_EQ(source.boot_id, LocalHostIdentity().boot_id);
  EXPECT_EQ(source.shm_name, src_->shm_name());
  EXPECT_EQ(source.tcp_address, server_->address());
}

TEST_F(TransportFactoryTest, SelectsShmOnThisHostAndTcpElsewhere) {
  AutoKvTransport transport;
  KvSource source = LocalKvSource(*src_, server_->address());
  EXPECT_THAT(transport.Select(source), IsOkAndHolds(KvTransportKind::kShm));

  // The same source seen from another machine.
  AutoKvTransport remote(HostIdentity{.hostname = "elsewhere", .boot_id = "other-boot"});
  EXPECT_THAT(remote.Select(source), IsOkAndHolds(KvTransportKind::kTcp));

  // A private pool has no segment: TCP even on this host.
  source.shm_name = "";
  EXPECT_THAT(transport.Select(source), IsOkAndHolds(KvTransportKind::kTcp));
  // A segment that cannot be opened falls back to TCP...
  source.shm_name = "/baton-kv-no-such-segment";
  EXPECT_THAT(transport.Select(source), IsOkAndHolds(KvTransportKind::kTcp));
  // ...and without TCP the shm failure is the answer.
  source.tcp_address = "";
  EXPECT_THAT(transport.Select(source), StatusIs(absl::StatusCode::kUnavailable));
  // No route at all.
  EXPECT_THAT(transport.Select(KvSource{.hostname = "x"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no TCP address")));
}

TEST_F(TransportFactoryTest, PullUsesTheSelectedTransport) {
  const KvPullSpec spec{.source = LocalKvSource(*src_, server_->address()),
                        .shape = kShape,
                        .src_blocks = {6, 7, 0},
                        .num_tokens = 5};
  const std::vector<BlockId> dst_blocks = {1, 2, 3};
  std::unique_ptr<KvTransport> local = *MakeKvTransport();
  ASSERT_THAT(local->Pull(spec, *dst_, dst_blocks, absl::Now() + absl::Seconds(10)), IsOk());
  EXPECT_TRUE(PulledExactly(*dst_, 2, spec.src_blocks, dst_blocks, 1));
  EXPECT_EQ(server_->num_requests_served(), 0);  // went through shared memory

  FillPool(*dst_, 2);
  AutoKvTransport remote(HostIdentity{.hostname = "elsewhere", .boot_id = "other-boot"});
  ASSERT_THAT(remote.Pull(spec, *dst_, dst_blocks, absl::Now() + absl::Seconds(10)), IsOk());
  EXPECT_TRUE(PulledExactly(*dst_, 2, spec.src_blocks, dst_blocks, 1));
  EXPECT_EQ(server_->num_requests_served(), 1);  // went over TCP
}

TEST(KvTransportKindTest, Names) {
  EXPECT_EQ(KvTransportKindName(KvTransportKind::kShm), "shm");
  EXPECT_EQ(KvTransportKindName(KvTransportKind::kTcp), "tcp");
}

}  // namespace
}  // namespace baton::runtime
