// RequestRegistry: who frees a prefill request's held KV when a cancel races the end of its
// prefill — exactly one of the serving call (its SetLease fails) and the canceller (MarkCancelled
// hands it the held request).
#include "runtime/worker/request_registry.h"

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;

TEST(RequestRegistryTest, ACancelBeforeTheLeaseLeavesTheKvToTheServingCall) {
  RequestRegistry registry;
  ASSERT_THAT(registry.Add("r"), IsOk());
  registry.SetSeqId("r", 7);
  std::optional<WorkerRequest> cancelled = registry.MarkCancelled("r");
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_FALSE(cancelled->kv_lease_deadline.has_value());  // nothing for the canceller to free
  EXPECT_TRUE(cancelled->cancelled->load());
  EXPECT_EQ(registry.size(), 1);  // the serving call cleans up
  EXPECT_FALSE(registry.SetLease("r", absl::Now() + absl::Seconds(30), "grant"));
  EXPECT_EQ(registry.NumHoldingKv(), 0);
}

TEST(RequestRegistryTest, ACancelAfterTheLeaseHandsTheHeldKvToTheCanceller) {
  RequestRegistry registry;
  ASSERT_THAT(registry.Add("r"), IsOk());
  registry.SetSeqId("r", 7);
  ASSERT_TRUE(registry.SetLease("r", absl::Now() + absl::Seconds(30), "grant"));
  EXPECT_EQ(registry.NumHoldingKv(), 1);
  std::optional<WorkerRequest> cancelled = registry.MarkCancelled("r");
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_TRUE(cancelled->kv_lease_deadline.has_value());
  EXPECT_EQ(cancelled->seq_id, 7);
  EXPECT_EQ(cancelled->kv_grant, "grant");
  EXPECT_EQ(registry.size(), 0);  // removed: nobody else frees it (no expiry either)
  EXPECT_TRUE(registry.TakeExpiredLeases(absl::InfiniteFuture()).empty());
  EXPECT_FALSE(registry.MarkCancelled("r").has_value());
}

TEST(RequestRegistryTest, AnExpiredLeaseIsTakenOnce) {
  RequestRegistry registry;
  ASSERT_THAT(registry.Add("r"), IsOk());
  registry.SetSeqId("r", 3);
  ASSERT_TRUE(registry.SetLease("r", absl::Now(), "grant"));
  std::vector<WorkerRequest> expired = registry.TakeExpiredLeases(absl::Now() + absl::Seconds(1));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].kv_grant, "grant");
  EXPECT_FALSE(registry.MarkCancelled("r").has_value());
}

}  // namespace
}  // namespace baton::runtime
