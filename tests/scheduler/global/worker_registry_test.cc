#include "scheduler/global/worker_registry.h"

#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;

WorkerEntry Entry(WorkerRole role, int idx, const std::string& incarnation_id) {
  return {.role = role, .instance_idx = idx, .incarnation_id = incarnation_id,
          .address = "127.0.0.1:" + std::to_string(6000 + idx)};
}

// The loads admission reads: the picked instance's, and every live instance of a role.
TEST(WorkerRegistryTest, LoadsFollowTheSchedulersAccounting) {
  WorkerRegistry registry({{WorkerRole::kPrefill, 2}, {WorkerRole::kDecode, 2}}, absl::Seconds(1));
  const absl::Time now = absl::Now();
  registry.Register(Entry(WorkerRole::kPrefill, 1, "p1"), now);
  registry.Register(Entry(WorkerRole::kPrefill, 0, "p0"), now);
  registry.Register(Entry(WorkerRole::kDecode, 1, "d1"), now);
  registry.Register(Entry(WorkerRole::kDecode, 0, "d0"), now);
  registry.AddPrefillLoad("p0", 300);
  registry.AddPrefillLoad("p1", 100);
  registry.AddActive("d1", 2);
  registry.AddActive("d1", 1);
  registry.AddActive("d0", 1);

  const std::optional<WorkerRef> pick = registry.PickPrefill();
  ASSERT_TRUE(pick.has_value());
  const std::optional<InstanceLoad> load = registry.LoadOf(*pick);
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->name, "prefill worker 1");
  EXPECT_EQ(load->outstanding_prefill_tokens, 100);

  EXPECT_THAT(registry.LiveLoads(WorkerRole::kDecode),
              ElementsAre(Field(&InstanceLoad::name, "decode worker 0"),
                          Field(&InstanceLoad::name, "decode worker 1")));
  EXPECT_EQ(registry.LiveLoads(WorkerRole::kDecode)[1].num_active_requests, 3);
  EXPECT_EQ(registry.NumActive("d1"), 3);
  EXPECT_EQ(registry.NumActive("unknown"), 0);
  EXPECT_TRUE(registry.LiveLoads(WorkerRole::kColocated).empty());

  // A dead instance has no load and is not live.
  registry.MarkDead("d0", "gone");
  EXPECT_THAT(registry.LiveLoads(WorkerRole::kDecode),
              ElementsAre(Field(&InstanceLoad::name, "decode worker 1")));
  EXPECT_EQ(registry.LoadOf(WorkerRef{.incarnation_id = "d0"}), std::nullopt);
}

}  // namespace
}  // namespace baton::scheduler
