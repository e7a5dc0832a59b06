// GrpcWorkerClient against a worker that stops answering: a socket that accepts connections and never
// replies (what a worker frozen by SIGSTOP looks like from outside: the kernel still completes the
// TCP handshake). Its calls end UNAVAILABLE as soon as CallOptions::abandon turns true, long before
// their deadline.
#include "scheduler/service/grpc_worker_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler {
namespace {

using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

// A listening socket nobody accepts on: connections complete in the backlog and hear nothing.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}};
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class AbandonTest : public ::testing::Test {
 protected:
  // abandon turns true 300 ms after the call starts; the deadline is a minute away.
  CallOptions Options() {
    const absl::Time dead_at = absl::Now() + absl::Milliseconds(300);
    return CallOptions{.deadline = absl::Now() + absl::Minutes(1),
                       .abandon = [dead_at] { return absl::Now() >= dead_at; }};
  }

  SilentListener frozen_;
  WorkerStubs stubs_;
  GrpcWorkerClient client_{&stubs_};
  WorkerRef worker_{.incarnation_id = "w", .address = frozen_.address()};
};

TEST_F(AbandonTest, ADecodeStreamToAFrozenWorkerEndsOnceItIsKnownDead) {
  const absl::Time start = absl::Now();
  int events = 0;
  const absl::Status status = client_.Decode(worker_, DecodeCall{.request_id = "r", .prompt_token_ids = {1}},
                                             Options(), [&](const DecodeEvent&) { return ++events, true; });
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("stopped answering")));
  EXPECT_EQ(events, 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(AbandonTest, APrefillToAFrozenWorkerEndsOnceItIsKnownDead) {
  const absl::Time start = absl::Now();
  EXPECT_THAT(client_.Prefill(worker_, PrefillCall{.request_id = "r", .prompt_token_ids = {1}}, Options()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("stopped answering")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(AbandonTest, WithoutAbandonTheDeadlineEndsTheCall) {
  EXPECT_THAT(client_.Prefill(worker_, PrefillCall{.request_id = "r", .prompt_token_ids = {1}},
                              CallOptions{.deadline = absl::Now() + absl::Milliseconds(300)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

// A restarted worker listens where the dead one did; the channel that saw the old one die is in
// gRPC's reconnect back-off, so the new incarnation gets its own (test_serving.py's restart test
// sends a request across that restart).
TEST(WorkerStubsTest, ANewIncarnationAtTheSameAddressGetsAFreshStub) {
  WorkerStubs stubs;
  const WorkerRef old{.incarnation_id = "a", .address = "127.0.0.1:1"};
  const WorkerRef restarted{.incarnation_id = "b", .address = "127.0.0.1:1"};
  const std::shared_ptr<v1::WorkerService::Stub> first = stubs.For(old);
  EXPECT_EQ(stubs.For(old), first) << "cached per incarnation";
  const std::shared_ptr<v1::WorkerService::Stub> second = stubs.For(restarted);
  EXPECT_NE(second, first);
  EXPECT_EQ(stubs.For(restarted), second);
  EXPECT_NE(stubs.For(WorkerRef{.incarnation_id = "b", .address = "127.0.0.1:2"}), second)
      << "another address, another stub";
}

TEST(CallWatchdogTest, AWatchGoneBeforeItFiresCancelsNothing) {
  CallWatchdog watchdog(absl::Milliseconds(5));
  std::atomic<int> polled = 0;
  for (int i = 0; i < 50; ++i) {
    grpc::ClientContext context;
    auto watch = watchdog.Start(&context, [&] { return ++polled, false; });
    absl::SleepFor(absl::Milliseconds(1));
    EXPECT_FALSE(watch->fired());
  }
  grpc::ClientContext context;
  auto watch = watchdog.Start(&context, [] { return true; });
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!watch->fired() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_TRUE(watch->fired());
  EXPECT_FALSE(watchdog.Start(&context, nullptr)->fired());  // nothing watched
}

}  // namespace
}  // namespace baton::scheduler
