// The emulated KV link (the cuda-emulated device's NCCL): join by id in either order, ordered spans,
// NCCL's rule that a send and its receive have the same size, and what a broken link does.
#include "runtime/transfer/emulated_kv_link.h"

#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

struct LinkPair {
  std::unique_ptr<KvLink> sender;
  std::unique_ptr<KvLink> receiver;
};

// The sender's process makes the id (as a KvServer does) and both join, concurrently.
LinkPair Join(EmulatedKvLinkFactory& sender_side, EmulatedKvLinkFactory& receiver_side) {
  absl::StatusOr<KvLinkId> id = sender_side.NewId();
  EXPECT_THAT(id, IsOk());
  auto sender = std::async(std::launch::async, [&] {
    return sender_side.Join(*id, kKvLinkSenderRank, 0, Soon());
  });
  absl::StatusOr<std::unique_ptr<KvLink>> receiver =
      receiver_side.Join(*id, kKvLinkReceiverRank, 0, Soon());
  absl::StatusOr<std::unique_ptr<KvLink>> sent = sender.get();
  EXPECT_THAT(receiver, IsOk());
  EXPECT_THAT(sent, IsOk());
  return LinkPair{.sender = *std::move(sent), .receiver = *std::move(receiver)};
}

std::vector<std::byte> Bytes(size_t n, int seed) {
  std::vector<std::byte> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return bytes;
}

TEST(EmulatedKvLinkTest, SpansArriveInOrderIntoTheirBuffers) {
  EmulatedKvLinkFactory prefill, decode;
  LinkPair link = Join(prefill, decode);
  std::vector<std::byte> a = Bytes(1000, 1), b = Bytes(3 << 20, 2);  // b: past socket buffers
  std::vector<std::byte> ra(a.size()), rb(b.size());
  const KvDeviceSpan send[] = {{a.data(), a.size()}, {b.data(), b.size()}};
  const KvDeviceSpan recv[] = {{ra.data(), ra.size()}, {rb.data(), rb.size()}};
  auto sent = std::async(std::launch::async, [&] { return link.sender->Send(send, Soon()); });
  EXPECT_THAT(link.receiver->Recv(recv, Soon()), IsOk());
  EXPECT_THAT(sent.get(), IsOk());
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
}

// A bf16 pool's slab ranges are whole elements, not whole words: spans of any byte count, at any
// address, arrive as they were.
TEST(EmulatedKvLinkTest, SpansOfOddSizesAtUnalignedAddressesArriveExactly) {
  EmulatedKvLinkFactory prefill, decode;
  LinkPair link = Join(prefill, decode);
  const std::vector<size_t> sizes = {2, 6, 18, 1, 3, (1 << 20) + 2};
  const std::vector<std::byte> src = Bytes(4096 + (1 << 20) + 64, 3);
  std::vector<std::byte> dst(src.size());
  std::vector<KvDeviceSpan> send, recv;
  size_t offset = 1;  // odd: no span is word-aligned on either side
  for (size_t n : sizes) {
    send.push_back({const_cast<std::byte*>(src.data()) + offset, n});
    recv.push_back({dst.data() + offset + 2, n});  // elsewhere in the receiver's buffer
    offset += n + 3;
  }
  auto sent = std::async(std::launch::async, [&] { return link.sender->Send(send, Soon()); });
  EXPECT_THAT(link.receiver->Recv(recv, Soon()), IsOk());
  EXPECT_THAT(sent.get(), IsOk());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(std::memcmp(recv[i].data, send[i].data, sizes[i]), 0) << "span " << i;
  }
}

TEST(EmulatedKvLinkTest, BothRanksMayJoinThroughOneFactory) {
  EmulatedKvLinkFactory both;
  LinkPair link = Join(both, both);
  std::vector<std::byte> a = Bytes(64, 3), ra(64);
  const KvDeviceSpan send[] = {{a.data(), a.size()}};
  const KvDeviceSpan recv[] = {{ra.data(), ra.size()}};
  ASSERT_THAT(link.sender->Send(send, Soon()), IsOk());  // fits the socket buffer
  ASSERT_THAT(link.receiver->Recv(recv, Soon()), IsOk());
  EXPECT_EQ(ra, a);
}

TEST(EmulatedKvLinkTest, ASendAndItsReceiveOfOtherSizesBreakTheLink) {
  EmulatedKvLinkFactory prefill, decode;
  LinkPair link = Join(prefill, decode);
  std::vector<std::byte> a = Bytes(64, 1), ra(32);
  const KvDeviceSpan send[] = {{a.data(), a.size()}};
  const KvDeviceSpan recv[] = {{ra.data(), ra.size()}};
  ASSERT_THAT(link.sender->Send(send, Soon()), IsOk());
  EXPECT_THAT(link.receiver->Recv(recv, Soon()),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("recv 0 of 32 bytes matched a send of 64 bytes")));
  EXPECT_THAT(link.receiver->Recv(recv, Soon()), StatusIs(absl::StatusCode::kFailedPrecondition));
  // The receiver's side is closed: the sender's next send fails instead of hanging.
  std::vector<std::byte> big = Bytes(8 << 20, 2);
  const KvDeviceSpan big_send[] = {{big.data(), big.size()}};
  EXPECT_THAT(link.sender->Send(big_send, Soon()), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(EmulatedKvLinkTest, AReceiveWithNoSendEndsAtItsDeadline) {
  EmulatedKvLinkFactory prefill, decode;
  LinkPair link = Join(prefill, decode);
  std::vector<std::byte> ra(16);
  const KvDeviceSpan recv[] = {{ra.data(), ra.size()}};
  EXPECT_THAT(link.receiver->Recv(recv, absl::Now() + absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST(EmulatedKvLinkTest, APeerThatGoesAwayIsUnavailable) {
  EmulatedKvLinkFactory prefill, decode;
  LinkPair link = Join(prefill, decode);
  link.sender.reset();
  std::vector<std::byte> ra(16);
  const KvDeviceSpan recv[] = {{ra.data(), ra.size()}};
  EXPECT_THAT(link.receiver->Recv(recv, Soon()), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(EmulatedKvLinkTest, JoinErrors) {
  EmulatedKvLinkFactory factory;
  absl::StatusOr<KvLinkId> id = factory.NewId();
  ASSERT_THAT(id, IsOk());
  EXPECT_THAT(factory.Join(*id, 2, 0, Soon()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(factory.Join(KvLinkId{}, 0, 0, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an id")));
  // The peer never joins: the rendezvous waits until the deadline, no longer.
  EXPECT_THAT(factory.Join(*id, kKvLinkSenderRank, 0, absl::Now() + absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  // An id joins one link: its listener is gone now.
  EmulatedKvLinkFactory other;
  EXPECT_THAT(other.Join(*id, kKvLinkReceiverRank, 0, absl::Now() + absl::Milliseconds(200)),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(EmulatedKvLinkTest, TwoSendersOnOneIdAreRefused) {
  EmulatedKvLinkFactory prefill, decode;
  absl::StatusOr<KvLinkId> id = prefill.NewId();
  ASSERT_THAT(id, IsOk());
  auto sender = std::async(std::launch::async, [&] {
    return prefill.Join(*id, kKvLinkSenderRank, 0, Soon());
  });
  decode.Join(*id, kKvLinkSenderRank, 0, absl::Now() + absl::Milliseconds(500)).IgnoreError();
  EXPECT_THAT(sender.get(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("both sides")));
}

}  // namespace
}  // namespace baton::runtime
