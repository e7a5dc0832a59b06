// TCP-specific behaviour of TcpKvTransport and KvServer: deadlines against servers that never
// answer or stall, dead and dying servers, server shutdown and timeouts, and the wire protocol
// itself, spoken by hand (whole blocks, slab pieces, and pieces that reach outside the pool).
#include "runtime/transfer/tcp_transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"
#include "runtime/transfer/kv_dtype.h"
#include "runtime/transfer/kv_server.h"
#include "runtime/transfer/rank_pulls.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/tcp_wire.h"
#include "tests/runtime/transfer/kv_test_pattern.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using transfer_testing::BlockHoldsPattern;
using transfer_testing::FillPool;
using transfer_testing::HoldsPattern;

constexpr KvPoolShape kShape{.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .block_size = 4};
constexpr int kNumBlocks = 16;
constexpr uint32_t kSeed = 3;
constexpr absl::Duration kSlack = absl::Milliseconds(250);

std::string Loopback(int port) { return absl::StrCat("127.0.0.1:", port); }

KvPullSpec SpecFor(const std::string& address, std::vector<BlockId> src_blocks) {
  const int num_tokens = static_cast<int>(src_blocks.size()) * kShape.block_size;
  return KvPullSpec{.source = {.tcp_address = address},
                    .shape = kShape,
                    .src_blocks = std::move(src_blocks),
                    .num_tokens = num_tokens};
}

// A server that accepts one connection, reads its hello and one request, and then does whatever `behave` does
// with the socket (stall, send half and close, ...). `behave` may wait on cancel_fd(), which the
// destructor signals.
class FakeKvServer {
 public:
  explicit FakeKvServer(std::function<void(int fd, const FakeKvServer&)> behave)
      : cancel_(eventfd(0, EFD_CLOEXEC)) {
    auto listener = ListenTcp("127.0.0.1", 0, 4);
    BATON_CHECK(listener.ok());
    listener_ = std::move(*listener);
    thread_ = std::thread([this, behave = std::move(behave)] {
      if (!WaitReadable(listener_.get(), IoWait{.cancel_fd = cancel_.get()}).ok()) return;
      UniqueFd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) return;
      const IoWait wait{.cancel_fd = cancel_.get()};
      KvWireHello hello{};
      if (!RecvAll(fd.get(), &hello, sizeof(hello), wait).ok()) return;
      std::string secret(hello.secret_bytes, '\0');
      if (!RecvAll(fd.get(), secret.data(), secret.size(), wait).ok()) return;
      KvWireRequest request{};
      if (!RecvAll(fd.get(), &request, sizeof(request), wait).ok()) return;
      std::vector<KvWirePiece> pieces(request.num_pieces);
      if (!RecvAll(fd.get(), pieces.data(), pieces.size() * sizeof(KvWirePiece), wait).ok()) {
        return;
      }
      behave(fd.get(), *this);
    });
  }
  ~FakeKvServer() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(cancel_.get(), &one, sizeof(one));
    thread_.join();
  }
  std::string address() const { return Loopback(LocalPort(listener_.get())); }
  int cancel_fd() const { return cancel_.get(); }

 private:
  UniqueFd cancel_;
  UniqueFd listener_;
  std::thread thread_;
};

// Sends a response header announcing `payload_bytes`, then the first `sent_bytes` of zeros.
void SendPartialResponse(int fd, uint64_t payload_bytes, size_t sent_bytes) {
  const KvWireResponse response{.magic = kKvWireMagic, .payload_bytes = payload_bytes};
  ASSERT_THAT(SendAll(fd, &response, sizeof(response), IoWait{}), IsOk());
  const std::vector<char> zeros(sent_bytes, 0);
  ASSERT_THAT(SendAll(fd, zeros.data(), zeros.size(), IoWait{}), IsOk());
}

class TcpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto src = KvPool::Create(kShape, kNumBlocks);
    ASSERT_THAT(src, IsOk());
    src_ = std::move(*src);
    FillPool(*src_, kSeed);
    auto dst = KvPool::Create(kShape, kNumBlocks);
    ASSERT_THAT(dst, IsOk());
    dst_ = std::move(*dst);
  }

  std::unique_ptr<KvPool> src_;
  std::unique_ptr<KvPool> dst_;
  TcpKvTransport transport_;
  const std::vector<BlockId> dst_blocks_ = {4, 5, 9};
};

TEST_F(TcpTransportTest, ServerThatNeverAnswersGivesDeadlineExceededOnTime) {
  // Listens but never accepts: the kernel completes the handshake and queues the request.
  auto listener = ListenTcp("127.0.0.1", 0, 4);
  ASSERT_THAT(listener, IsOk());
  const absl::Duration timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  EXPECT_THAT(transport_.Pull(SpecFor(Loopback(LocalPort(listener->get())), {0, 1, 2}), *dst_,
                              dst_blocks_, start + timeout),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, timeout - absl::Milliseconds(5));
  EXPECT_LE(elapsed, timeout + kSlack);
}

TEST_F(TcpTransportTest, ServerStallingMidPayloadGivesDeadlineExceededOnTime) {
  const uint64_t payload_bytes = 3 * kShape.BlockBytes();
  FakeKvServer server([&](int fd, const FakeKvServer& self) {
    SendPartialResponse(fd, payload_bytes, payload_bytes / 2);
    WaitReadable(self.cancel_fd(), IoWait{}).IgnoreError();  // stall until the test ends
  });
  const absl::Duration timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  EXPECT_THAT(
      transport_.Pull(SpecFor(server.address(), {0, 1, 2}), *dst_, dst_blocks_, start + timeout),
      StatusIs(absl::StatusCode::kDeadlineExceeded));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, timeout - absl::Milliseconds(5));
  EXPECT_LE(elapsed, timeout + kSlack);
}

TEST_F(TcpTransportTest, ServerClosingMidPayloadIsUnavailable) {
  const uint64_t payload_bytes = 3 * kShape.BlockBytes();
  FakeKvServer server([&](int fd, const FakeKvServer&) {
    SendPartialResponse(fd, payload_bytes, payload_bytes / 2);
    shutdown(fd, SHUT_RDWR);
  });
  EXPECT_THAT(transport_.Pull(SpecFor(server.address(), {0, 1, 2}), *dst_, dst_blocks_,
                              absl::Now() + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("closed")));
}

TEST_F(TcpTransportTest, ServerBreakingTheProtocolIsInternal) {
  FakeKvServer server([&](int fd, const FakeKvServer&) {
    SendPartialResponse(fd, /*payload_bytes=*/7, /*sent_bytes=*/7);  // not 3 blocks
  });
  EXPECT_THAT(transport_.Pull(SpecFor(server.address(), {0, 1, 2}), *dst_, dst_blocks_,
                              absl::Now() + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("payload")));
}

TEST_F(TcpTransportTest, StoppedServerIsUnavailable) {
  auto server = KvServer::Start(*src_, KvServerOptions{});
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  ASSERT_THAT(transport_.Pull(SpecFor(address, {1}), *dst_, std::vector<BlockId>{0},
                              absl::Now() + absl::Seconds(10)),
              IsOk());
  (*server)->Stop();
  EXPECT_THAT(transport_.Pull(SpecFor(address, {1}), *dst_, std::vector<BlockId>{0},
                              absl::Now() + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot connect")));
}

TEST_F(TcpTransportTest, KilledServerProcessIsUnavailable) {
  int ports[2];
  ASSERT_EQ(pipe(ports), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ports[0]);
    auto server = KvServer::Start(*src_, KvServerOptions{});
    if (!server.ok()) _exit(2);
    const int port = (*server)->port();
    if (write(ports[1], &port, sizeof(port)) != sizeof(port)) _exit(3);
    for (;;) pause();
  }
  close(ports[1]);
  int port = 0;
  ASSERT_EQ(read(ports[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  close(ports[0]);
  const KvPullSpec spec = SpecFor(Loopback(port), {7, 8, 3});
  ASSERT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, absl::Now() + absl::Seconds(10)), IsOk());
  for (size_t i = 0; i < dst_blocks_.size(); ++i) {
    EXPECT_TRUE(BlockHoldsPattern(*dst_, dst_blocks_[i], kSeed, spec.src_blocks[i]));
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_THAT(transport_.Pull(spec, *dst_, dst_blocks_, absl::Now() + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(TcpTransportTest, MalformedAddressesAreRejected) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  EXPECT_THAT(transport_.Pull(SpecFor("", {0}), *dst_, std::vector<BlockId>{0}, deadline),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no TCP address")));
  EXPECT_THAT(transport_.Pull(SpecFor("no-port", {0}), *dst_, std::vector<BlockId>{0}, deadline),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParseHostPortTest, Table) {
  auto v4 = ParseHostPort("10.0.0.7:5555");
  ASSERT_THAT(v4, IsOk());
  EXPECT_EQ(v4->host, "10.0.0.7");
  EXPECT_EQ(v4->port, 5555);
  auto v6 = ParseHostPort("[::1]:80");
  ASSERT_THAT(v6, IsOk());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 80);
  auto name = ParseHostPort("prefill-0:0");
  ASSERT_THAT(name, IsOk());
  EXPECT_EQ(name->host, "prefill-0");
  for (const char* bad :
       {"", "host", ":80", "host:", "host:-1", "host:65536", "::1:80", "[::1]80"}) {
    EXPECT_THAT(ParseHostPort(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

// Whole blocks start .. start + num_blocks - 1 of a kShape pool: every layer and KV head.
KvWirePiece Blocks(int32_t start, int32_t num_blocks) {
  return KvWirePiece{.src_start = start,
                     .num_blocks = num_blocks,
                     .layer_idx = 0,
                     .num_layers = kShape.num_layers,
                     .kv_head_idx = 0,
                     .num_kv_heads = kShape.num_kv_heads};
}

// A raw client speaking tcp_wire.h, to test the server against the protocol document.
class RawClient {
 public:
  // Connects and sends the hello with `secret`.
  explicit RawClient(const std::string& address, const std::string& secret = "") {
    auto fd = ConnectKvServer(address, secret, Wait());
    BATON_CHECK(fd.ok());
    fd_ = std::move(*fd);
  }
  absl::Status Send(const KvWireRequest& request, const std::vector<KvWirePiece>& pieces) {
    RETURN_IF_ERROR(SendAll(fd_.get(), &request, sizeof(request), Wait()));
    return SendAll(fd_.get(), pieces.data(), pieces.size() * sizeof(KvWirePiece), Wait());
  }
  absl::StatusOr<KvWireResponse> ReadResponse(std::string* message, std::vector<char>* payload) {
    KvWireResponse response{};
    RETURN_IF_ERROR(RecvAll(fd_.get(), &response, sizeof(response), Wait()));
    message->assign(response.message_bytes, '\0');
    RETURN_IF_ERROR(RecvAll(fd_.get(), message->data(), message->size(), Wait()));
    payload->assign(response.payload_bytes, 0);
    RETURN_IF_ERROR(RecvAll(fd_.get(), payload->data(), payload->size(), Wait()));
    return response;
  }
  // OK if the server closed the connection (EOF) before the deadline.
  absl::Status WaitForClose(absl::Duration timeout) {
    char byte;
    absl::Status status = RecvAll(fd_.get(), &byte, 1, IoWait{.deadline = absl::Now() + timeout});
    if (status.code() == absl::StatusCode::kUnavailable) return absl::OkStatus();
    return status.ok() ? absl::InternalError("unexpected byte") : status;
  }
  int fd() const { return fd_.get(); }

 private:
  static IoWait Wait() { return IoWait{.deadline = absl::Now() + absl::Seconds(5)}; }
  UniqueFd fd_;
};

KvWireRequest RequestFor(const KvPoolShape& shape, uint32_t num_pieces) {
  return KvWireRequest{.magic = kKvWireMagic,
                       .version = kKvWireVersion,
                       .num_pieces = num_pieces,
                       .num_layers = shape.num_layers,
                       .num_kv_heads = shape.num_kv_heads,
                       .head_dim = shape.head_dim,
                       .block_size = shape.block_size,
                       .dtype = KvDTypeCode(shape.dtype),
                       .kind = kKvWireInline};
}

TEST_F(TcpTransportTest, ServerAnswersSeveralRequestsAndErrorsOnOneConnection) {
  auto server = KvServer::Start(*src_, KvServerOptions{});
  ASSERT_THAT(server, IsOk());
  RawClient client((*server)->address());
  std::string message;
  std::vector<char> payload;
  const size_t block_bytes = kShape.BlockBytes();

  // Two runs of whole blocks: blocks 2..4 then block 11, in request order.
  ASSERT_THAT(client.Send(RequestFor(kShape, 2), {Blocks(2, 3), Blocks(11, 1)}), IsOk());
  auto response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, 0);
  ASSERT_EQ(payload.size(), 4 * block_bytes);
  const BlockId expected[] = {2, 3, 4, 11};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(HoldsPattern(reinterpret_cast<const std::byte*>(payload.data()) + i * block_bytes,
                             block_bytes, kSeed, expected[i]));
  }
  // An out-of-range run is an error response; the connection stays usable.
  ASSERT_THAT(client.Send(RequestFor(kShape, 1), {Blocks(kNumBlocks - 1, 2)}), IsOk());
  response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(message, HasSubstr("outside the pool"));
  EXPECT_TRUE(payload.empty());
  // So is a shape mismatch.
  KvPoolShape other = kShape;
  other.num_layers = 5;
  ASSERT_THAT(client.Send(RequestFor(other, 1), {Blocks(0, 1)}), IsOk());
  response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(message, HasSubstr("layers 5"));
  // And so is a request for another element type: bytes of another width cannot land as the
  // client expects.
  KvPoolShape bf16 = kShape;
  bf16.dtype = DType::kBF16;
  ASSERT_THAT(client.Send(RequestFor(bf16, 1), {Blocks(0, 1)}), IsOk());
  response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(message, AllOf(HasSubstr("expects a pool of shape (layers 2, kv heads 2, head_dim 8, "
                                       "block_size 4, dtype bf16)"),
                             HasSubstr("this pool is (layers 2, kv heads 2, head_dim 8, "
                                       "block_size 4, dtype f32)")));
  EXPECT_TRUE(payload.empty());
  KvWireRequest unknown_dtype = RequestFor(kShape, 1);
  unknown_dtype.dtype = 9;
  ASSERT_THAT(client.Send(unknown_dtype, {Blocks(0, 1)}), IsOk());
  response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(message, AllOf(HasSubstr("unknown KV element type 9"), HasSubstr("dtype f32")));
  // And a good request still works afterwards.
  ASSERT_THAT(client.Send(RequestFor(kShape, 1), {Blocks(0, 1)}), IsOk());
  response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, 0);
  EXPECT_EQ((*server)->num_requests_served(), 2);
}

// The bytes of (layer, K or V, kv head) of `block` in a kShape pool, computed from the layout in
// kv_pool.h rather than through kv_slab_copy.h.
const std::byte* HeadData(const KvPool& pool, BlockId block, int layer, int kv, int kv_head) {
  const size_t head_bytes = size_t{kShape.block_size} * kShape.head_dim * DTypeBytes(kShape.dtype);
  return pool.BlockData(block) +
         ((size_t(layer) * 2 + kv) * kShape.num_kv_heads + kv_head) * head_bytes;
}

TEST_F(TcpTransportTest, ServerSendsSlabPiecesPackedInProtocolOrder) {
  auto server = KvServer::Start(*src_, KvServerOptions{});
  ASSERT_THAT(server, IsOk());
  RawClient client((*server)->address());
  // Layer 1 x head 1 of blocks 5..6, then layers 0..1 x head 0 of block 9.
  const std::vector<KvWirePiece> pieces = {
      {.src_start = 5, .num_blocks = 2, .layer_idx = 1, .num_layers = 1, .kv_head_idx = 1,
       .num_kv_heads = 1},
      {.src_start = 9, .num_blocks = 1, .layer_idx = 0, .num_layers = 2, .kv_head_idx = 0,
       .num_kv_heads = 1}};
  ASSERT_THAT(client.Send(RequestFor(kShape, 2), pieces), IsOk());
  std::string message;
  std::vector<char> payload;
  auto response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  ASSERT_EQ(response->status_code, 0) << message;
  // The payload, per piece, block, layer, K then V: one head of block_size x head_dim each.
  struct Expected {
    BlockId block;
    int layer;
  };
  const Expected order[] = {{5, 1}, {6, 1}, {9, 0}, {9, 1}};
  const size_t head_bytes = size_t{kShape.block_size} * kShape.head_dim * DTypeBytes(kShape.dtype);
  ASSERT_EQ(payload.size(), std::size(order) * 2 * head_bytes);
  const auto* data = reinterpret_cast<const std::byte*>(payload.data());
  for (size_t i = 0; i < std::size(order); ++i) {
    const int kv_head = order[i].block == 9 ? 0 : 1;
    for (int kv = 0; kv < 2; ++kv) {
      SCOPED_TRACE(absl::StrCat("block ", order[i].block, " layer ", order[i].layer, " kv ", kv));
      EXPECT_EQ(std::memcmp(data + (2 * i + kv) * head_bytes,
                            HeadData(*src_, order[i].block, order[i].layer, kv, kv_head),
                            head_bytes),
                0);
    }
  }
}

TEST_F(TcpTransportTest, ServerRejectsPiecesOutsideItsPoolAndStaysUsable) {
  auto server = KvServer::Start(*src_, KvServerOptions{});
  ASSERT_THAT(server, IsOk());
  RawClient client((*server)->address());
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  struct Bad {
    KvWirePiece piece;
    const char* message;
  };
  const KvWirePiece good = Blocks(0, 1);
  const auto with = [&](std::function<void(KvWirePiece&)> edit) {
    KvWirePiece piece = good;
    edit(piece);
    return piece;
  };
  const Bad bad_pieces[] = {
      {with([](KvWirePiece& p) { p.src_start = -1; }), "outside the pool of 16 blocks"},
      {with([](KvWirePiece& p) { p.num_blocks = 0; }), "outside the pool"},
      {with([](KvWirePiece& p) { p.src_start = kNumBlocks - 1, p.num_blocks = 2; }),
       "blocks [15, 17) outside"},
      {with([](KvWirePiece& p) { p.src_start = kMax, p.num_blocks = kMax; }), "outside the pool"},
      {with([](KvWirePiece& p) { p.layer_idx = -1; }), "layers [-1, 1)"},
      {with([](KvWirePiece& p) { p.layer_idx = 1; }), "layers [1, 3)"},
      {with([](KvWirePiece& p) { p.layer_idx = kMax, p.num_layers = kMax; }), "outside"},
      {with([](KvWirePiece& p) { p.kv_head_idx = 1; }), "kv heads [1, 3)"},
      {with([](KvWirePiece& p) { p.kv_head_idx = kMax, p.num_kv_heads = kMax; }), "outside"},
      {with([](KvWirePiece& p) { p.num_layers = 0; }), "empty piece"},
      {with([](KvWirePiece& p) { p.num_kv_heads = -3; }), "empty piece"},
  };
  std::string message;
  std::vector<char> payload;
  for (const Bad& bad : bad_pieces) {
    SCOPED_TRACE(bad.message);
    // A good piece first: the server checks every piece before it sends a byte.
    ASSERT_THAT(client.Send(RequestFor(kShape, 2), {good, bad.piece}), IsOk());
    auto response = client.ReadResponse(&message, &payload);
    ASSERT_THAT(response, IsOk());
    EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(message, HasSubstr("piece 1"));
    EXPECT_THAT(message, HasSubstr(bad.message));
    EXPECT_TRUE(payload.empty());
  }
  EXPECT_EQ((*server)->num_requests_served(), 0);
  ASSERT_THAT(client.Send(RequestFor(kShape, 1), {good}), IsOk());
  auto response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, 0);
  EXPECT_EQ(payload.size(), kShape.BlockBytes());
}

TEST_F(TcpTransportTest, ServerRejectsTooManyPiecesAndCloses) {
  auto server = KvServer::Start(*src_, KvServerOptions{});
  ASSERT_THAT(server, IsOk());
  RawClient client((*server)->address());
  ASSERT_THAT(client.Send(RequestFor(kShape, kKvWireMaxPieces + 1), {}), IsOk());
  std::string message;
  std::vector<char> payload;
  auto response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(message, HasSubstr("pieces in one request"));
  EXPECT_THAT(client.WaitForClose(absl::Seconds(5)), IsOk());
}

TEST_F(TcpTransportTest, ServerRejectsABadMagicAndCloses) {
  auto server = KvServer::Start(*src_, KvServerOptions{});
  ASSERT_THAT(server, IsOk());
  RawClient client((*server)->address());
  KvWireRequest request = RequestFor(kShape, 0);
  request.magic = 0xdeadbeef;
  ASSERT_THAT(client.Send(request, {}), IsOk());
  std::string message;
  std::vector<char> payload;
  auto response = client.ReadResponse(&message, &payload);
  ASSERT_THAT(response, IsOk());
  EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client.WaitForClose(absl::Seconds(5)), IsOk());
}

TEST_F(TcpTransportTest, AServerWithASecretRefusesEveryoneElseBeforeSendingAByte) {
  const std::string secret(64, 'k');
  auto server = KvServer::Start(*src_, KvServerOptions{.secret = secret});
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  for (const std::string& presented : {std::string(), std::string(64, 'j'), secret + "k"}) {
    TcpKvTransport intruder(presented);
    EXPECT_THAT(intruder.Pull(SpecFor(address, {0, 1}), *dst_, std::vector<BlockId>{4, 5},
                              absl::Now() + absl::Seconds(10)),
                StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("deployment secret")));
    RawClient raw(address, presented);
    ASSERT_THAT(raw.Send(RequestFor(kShape, 1), {Blocks(0, 1)}), IsOk());
    std::string message;
    std::vector<char> payload;
    auto response = raw.ReadResponse(&message, &payload);
    ASSERT_THAT(response, IsOk());
    EXPECT_EQ(response->status_code, static_cast<int>(absl::StatusCode::kUnauthenticated));
    EXPECT_TRUE(payload.empty());
    EXPECT_THAT(raw.WaitForClose(absl::Seconds(5)), IsOk());
  }
  EXPECT_EQ((*server)->num_requests_served(), 0);
  TcpKvTransport member(secret);
  EXPECT_THAT(member.Pull(SpecFor(address, {0, 1}), *dst_, std::vector<BlockId>{4, 5},
                          absl::Now() + absl::Seconds(10)),
              IsOk());
}

TEST_F(TcpTransportTest, ServerClosesIdleConnectionsAfterIoTimeout) {
  auto server = KvServer::Start(*src_, KvServerOptions{.io_timeout = absl::Milliseconds(100)});
  ASSERT_THAT(server, IsOk());
  RawClient client((*server)->address());
  const absl::Time start = absl::Now();
  EXPECT_THAT(client.WaitForClose(absl::Seconds(5)), IsOk());
  EXPECT_LE(absl::Now() - start, absl::Milliseconds(100) + kSlack);
}

TEST_F(TcpTransportTest, StopReturnsPromptlyWithStalledClients) {
  auto server = KvServer::Start(*src_, KvServerOptions{.io_timeout = absl::Seconds(30)});
  ASSERT_THAT(server, IsOk());
  RawClient idle((*server)->address());
  RawClient half_sent((*server)->address());
  const KvWireRequest request = RequestFor(kShape, 1);
  ASSERT_THAT(SendAll(half_sent.fd(), &request, sizeof(request) / 2, IoWait{}), IsOk());
  absl::SleepFor(absl::Milliseconds(50));  // let the server accept both
  const absl::Time start = absl::Now();
  (*server)->Stop();
  EXPECT_LE(absl::Now() - start, absl::Seconds(1));
  EXPECT_THAT(idle.WaitForClose(absl::Seconds(1)), IsOk());
  EXPECT_THAT(half_sent.WaitForClose(absl::Seconds(1)), IsOk());
}

TEST_F(TcpTransportTest, ConnectionsBeyondTheLimitAreRefused) {
  auto server = KvServer::Start(*src_, KvServerOptions{.max_connections = 1});
  ASSERT_THAT(server, IsOk());
  const std::string address = (*server)->address();
  {
    RawClient holder(address);
    // A served request proves the server accepted (and now holds) this connection.
    ASSERT_THAT(holder.Send(RequestFor(kShape, 1), {Blocks(0, 1)}), IsOk());
    std::string message;
    std::vector<char> payload;
    ASSERT_THAT(holder.ReadResponse(&message, &payload), IsOk());
    EXPECT_THAT(transport_.Pull(SpecFor(address, {0}), *dst_, std::vector<BlockId>{0},
                                absl::Now() + absl::Seconds(5)),
                StatusIs(absl::StatusCode::kUnavailable));
  }
  // Once the holder is gone, pulls get through again (its thread ends asynchronously: retry).
  absl::Status status;
  for (int attempt = 0; attempt < 50; ++attempt) {
    status = transport_.Pull(SpecFor(address, {0}), *dst_, std::vector<BlockId>{0},
                             absl::Now() + absl::Seconds(5));
    if (status.ok()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(status, IsOk());
  EXPECT_EQ((*server)->num_requests_served(), 2);
}

// A TCP connection that sends nothing (no hello), as an attacker would hold one.
UniqueFd SilentConnection(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(port));
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BATON_CHECK(connect(fd.get(), reinterpret_cast<sockaddr*>(&server), sizeof(server)) == 0);
  BATON_CHECK(fcntl(fd.get(), F_SETFL, O_NONBLOCK) == 0);  // as socket_io.h's calls expect
  return fd;
}

// Issue 37, defect 4: 70 connections that never sent a hello filled the 64-connection cap for 30 s,
// and a real puller got a reset.
TEST_F(TcpTransportTest, ConnectionsWithoutAHelloCannotKeepAPullerOut) {
  auto server = KvServer::Start(*src_, KvServerOptions{.hello_timeout = absl::Seconds(2), .secret = "s3cret"});
  ASSERT_THAT(server, IsOk());
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 70; ++i) silent.push_back(SilentConnection((*server)->port()));
  absl::SleepFor(absl::Milliseconds(100));  // let the server accept them all
  TcpKvTransport puller("s3cret");
  EXPECT_THAT(puller.Pull(SpecFor((*server)->address(), {0, 1}), *dst_, std::vector<BlockId>{0, 1},
                          absl::Now() + absl::Seconds(5)),
              IsOk());
  EXPECT_TRUE(BlockHoldsPattern(*dst_, 0, kSeed, 0));
  // And the silent ones are closed once their hello is overdue, not after the 30 s idle timeout.
  const absl::Time start = absl::Now();
  for (const UniqueFd& fd : silent) {
    char byte;
    const absl::Status closed = RecvAll(fd.get(), &byte, 1, IoWait{.deadline = start + absl::Seconds(5)});
    ASSERT_EQ(closed.code(), absl::StatusCode::kUnavailable) << closed;  // EOF or reset, not the deadline
  }
  EXPECT_LE(absl::Now() - start, absl::Seconds(2) + kSlack);
}

}  // namespace
}  // namespace baton::runtime
