// TokenChannel: outputs in order, Pop's deadline, and the backpressure signals (issue 37, defect 5):
// Push says once when the consumer has fallen kPauseBacklog behind, Pop says once when it caught up.
#include "runtime/engine/token_channel.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

TokenOutput Token(int32_t id) { return TokenOutput{.seq_id = 7, .token_id = id}; }

TEST(TokenChannelTest, PopsInOrderAndTimesOut) {
  TokenChannel channel;
  absl::StatusOr<TokenOutput> out;
  EXPECT_FALSE(channel.Pop(absl::Now() + absl::Milliseconds(10), &out));
  channel.Push(Token(1));
  channel.Push(absl::UnavailableError("step failed"));
  ASSERT_TRUE(channel.Pop(absl::Now(), &out));
  EXPECT_EQ(out->token_id, 1);
  ASSERT_TRUE(channel.Pop(absl::Now(), &out));
  EXPECT_FALSE(out.ok());
}

TEST(TokenChannelTest, SaysOnceWhenTheConsumerFellBehindAndOnceWhenItCaughtUp) {
  TokenChannel channel;
  int said_behind = 0;
  for (int i = 0; i < 100; ++i) {
    const bool behind = channel.Push(Token(i));
    said_behind += behind;
    if (behind) {
      EXPECT_EQ(i + 1, static_cast<int>(TokenChannel::kPauseBacklog));
    }
  }
  EXPECT_EQ(said_behind, 1);
  int said_resume = 0;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<TokenOutput> out;
    bool resume = false;
    ASSERT_TRUE(channel.Pop(absl::Now(), &out, &resume));
    EXPECT_EQ(out->token_id, i);
    said_resume += resume;
    if (resume) {
      EXPECT_EQ(100 - i - 1, static_cast<int>(TokenChannel::kResumeBacklog));
    }
  }
  EXPECT_EQ(said_resume, 1);
  // And again for the next time it falls behind.
  for (size_t i = 0; i < TokenChannel::kPauseBacklog - 1; ++i) EXPECT_FALSE(channel.Push(Token(0)));
  EXPECT_TRUE(channel.Push(Token(0)));
}

}  // namespace
}  // namespace baton::runtime
