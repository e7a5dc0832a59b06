#include "scheduler/global/worker_registry.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

  const std::optional<RoutingDecision> pick = PickPrefill(registry.LiveInstances(WorkerRole::kPrefill), 0);
  ASSERT_TRUE(pick.has_value());
  const std::optional<InstanceLoad> load = registry.LoadOf(pick->worker);
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

// The snapshot routing decides from: live instances of one role, by index, with free KV blocks from
// the last heartbeat and the scheduler's own accounting.
// Issue 37, defect 3: a missed heartbeat made a worker dead at once; now it is only suspected,
// stays routable, and a probe's answer settles it.
// Requests routed at the same moment: each pick is charged its prompt before the next looks, so two
// prompts on two idle prefill instances go one to each.
TEST(WorkerRegistryTest, APrefillPickIsChargedBeforeTheNextPick) {
  WorkerRegistry registry({}, absl::Seconds(10));
  const absl::Time now = absl::Now();
  registry.Register(Entry(WorkerRole::kPrefill, 0, "p0"), now);
  registry.Register(Entry(WorkerRole::kPrefill, 1, "p1"), now);
  const std::optional<RoutingDecision> first = registry.PickPrefillAndCharge(nullptr, 300);
  const std::optional<RoutingDecision> second = registry.PickPrefillAndCharge(nullptr, 300);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->worker.incarnation_id, "p0");
  EXPECT_EQ(second->worker.incarnation_id, "p1");
  EXPECT_EQ(registry.LoadOf(first->worker)->outstanding_prefill_tokens, 300);
  registry.AddPrefillLoad("p0", -300);
  EXPECT_EQ(registry.LoadOf(first->worker)->outstanding_prefill_tokens, 0);
}

TEST(WorkerRegistryTest, SilenceMakesASuspectThatAProbeSettles) {
  WorkerRegistry registry({{WorkerRole::kDecode, 2}}, absl::Seconds(1));
  const absl::Time start = absl::Now();
  registry.Register(Entry(WorkerRole::kDecode, 0, "d0"), start);
  registry.Register(Entry(WorkerRole::kDecode, 1, "d1"), start);
  EXPECT_TRUE(registry.Suspects(start + absl::Milliseconds(900)).empty());
  const absl::Time late = start + absl::Milliseconds(1500);
  registry.Heartbeat("d1", {}, start + absl::Milliseconds(1000));
  const std::vector<WorkerRegistry::Suspect> suspects = registry.Suspects(late);
  ASSERT_EQ(suspects.size(), 1u);
  EXPECT_EQ(suspects[0].worker.incarnation_id, "d0");
  EXPECT_EQ(suspects[0].silence, absl::Milliseconds(1500));
  EXPECT_TRUE(registry.Suspects(late).empty()) << "suspected once, until settled";
  EXPECT_EQ(registry.LiveInstances(WorkerRole::kDecode).size(), 2u) << "a suspect is still routable";
  registry.Vouch("d0", late);  // it answered the probe: silent from there
  const std::vector<WorkerRegistry::Suspect> next = registry.Suspects(late + absl::Milliseconds(900));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].worker.incarnation_id, "d1");  // silent since its heartbeat at 1 s
  const std::vector<WorkerRegistry::Suspect> again = registry.Suspects(late + absl::Milliseconds(1100));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].worker.incarnation_id, "d0");
  registry.MarkDead("d0", "no answer to a probe");
  EXPECT_EQ(registry.LiveInstances(WorkerRole::kDecode).size(), 1u);
}

TEST(WorkerRegistryTest, LiveInstancesSnapshot) {
  WorkerRegistry registry({{WorkerRole::kDecode, 3}}, absl::Seconds(1));
  const absl::Time now = absl::Now();
  for (int idx : {2, 0, 1}) {
    WorkerEntry entry = Entry(WorkerRole::kDecode, idx, absl::StrCat("d", idx));
    entry.block_size = 4;
    registry.Register(std::move(entry), now);
  }
  registry.Register(Entry(WorkerRole::kPrefill, 0, "p0"), now);
  ASSERT_TRUE(registry.Heartbeat("d1", WorkerLoad{.num_kv_blocks_total = 10, .num_kv_blocks_used = 7}, now));
  registry.AddActive("d1", 2);
  registry.MarkDead("d2", "gone");

  const std::vector<InstanceSnapshot> live = registry.LiveInstances(WorkerRole::kDecode);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].worker.incarnation_id, "d0");
  EXPECT_EQ(live[1].worker.incarnation_id, "d1");
  EXPECT_EQ(live[1].worker.address, "127.0.0.1:6001");
  EXPECT_EQ(live[1].block_size, 4);
  EXPECT_EQ(live[1].num_kv_blocks_free, 3);
  EXPECT_EQ(live[1].num_active_requests, 2);
  EXPECT_TRUE(registry.LiveInstances(WorkerRole::kColocated).empty());
}

// Each instance keeps the layout it registered with; a new incarnation replaces it.
TEST(WorkerRegistryTest, KeepsEachInstancesLayout) {
  WorkerRegistry registry({{WorkerRole::kPrefill, 1}, {WorkerRole::kDecode, 1}}, absl::Seconds(1));
  const absl::Time now = absl::Now();
  WorkerEntry prefill = Entry(WorkerRole::kPrefill, 0, "p0");
  prefill.layout = runtime::ParallelLayout{.tp_size = 2, .pp_size = 2, .stage_num_layers = {3, 1}};
  registry.Register(std::move(prefill), now);
  registry.Register(Entry(WorkerRole::kDecode, 0, "d0"), now);

  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "p0"}),
            (runtime::ParallelLayout{.tp_size = 2, .pp_size = 2, .stage_num_layers = {3, 1}}));
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "d0"}), runtime::ParallelLayout{});
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "unknown"}), std::nullopt);

  WorkerEntry restarted = Entry(WorkerRole::kDecode, 0, "d0-new");
  restarted.layout = runtime::ParallelLayout{.tp_size = 4, .pp_size = 1};
  registry.Register(std::move(restarted), now);
  EXPECT_EQ(registry.LayoutOf(WorkerRef{.incarnation_id = "d0-new"})->tp_size, 4);
  for (const WorkerEntry& entry : registry.Snapshot()) {
    if (entry.incarnation_id == "p0") {
      EXPECT_EQ(entry.layout.pp_size, 2);
    }
  }
}

}  // namespace
}  // namespace baton::scheduler
