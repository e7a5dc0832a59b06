// Table-driven tests of the routing policy (scheduler/global/routing.h), in the manner of
// TensorRT-LLM's capacitySchedulerTest: each row is a snapshot of instance loads (with how much of
// the request's prompt each one's prefix cache holds) and the pick it must produce, with its label.
#include "scheduler/global/routing.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using ::testing::HasSubstr;

struct Load {
  int idx;
  int64_t prefill_tokens = 0;
  int active = 0;
  int free_blocks = 0;
  int block_size = 16;
  int cached = 0;  // the prompt's tokens its prefix cache holds
};

std::vector<InstanceSnapshot> Snapshot(WorkerRole role, const std::vector<Load>& loads) {
  std::vector<InstanceSnapshot> out;
  for (const Load& load : loads) {
    out.push_back(InstanceSnapshot{
        .worker = WorkerRef{.incarnation_id = absl::StrCat("w", load.idx),
                            .address = absl::StrCat("127.0.0.1:", 7000 + load.idx),
                            .role = role,
                            .instance_idx = load.idx},
        .block_size = load.block_size,
        .num_kv_blocks_free = load.free_blocks,
        .outstanding_prefill_tokens = load.prefill_tokens,
        .num_active_requests = load.active,
        .num_cached_tokens = load.cached});
  }
  return out;
}

struct Case {
  std::string name;
  std::vector<Load> loads;
  int num_prompt_tokens = 0;
  std::optional<int> want_idx;    // nullopt: no pick
  std::string want_reason = "";  // a substring of the reason
  std::string want_label = "";   // empty: not checked
};

std::optional<int> IdxOf(const std::optional<RoutingDecision>& decision) {
  if (!decision) return std::nullopt;
  return decision->worker.instance_idx;
}

TEST(RoutingTest, Prefill) {
  const std::vector<Case> cases = {
      {.name = "none live", .loads = {}, .want_idx = std::nullopt},
      {.name = "one", .loads = {{.idx = 3, .prefill_tokens = 900}}, .want_idx = 3,
       .want_reason = "least prefill work: 900 outstanding + 0 to compute", .want_label = "least_loaded"},
      {.name = "fewest tokens",
       .loads = {{.idx = 0, .prefill_tokens = 300}, {.idx = 1, .prefill_tokens = 100},
                 {.idx = 2, .prefill_tokens = 200}},
       .want_idx = 1},
      {.name = "active requests do not matter",
       .loads = {{.idx = 0, .prefill_tokens = 10, .active = 50}, {.idx = 1, .prefill_tokens = 20}},
       .want_idx = 0},
      {.name = "tie: lowest index, whatever the order",
       .loads = {{.idx = 2, .prefill_tokens = 5}, {.idx = 1, .prefill_tokens = 5},
                 {.idx = 3, .prefill_tokens = 5}},
       .want_idx = 1},
      {.name = "cached tokens are credited against the queue",
       .loads = {{.idx = 0, .prefill_tokens = 100}, {.idx = 1, .prefill_tokens = 500, .cached = 1920}},
       .num_prompt_tokens = 2000, .want_idx = 1,
       .want_reason = "least prefill work: 500 outstanding + 80 to compute (1920 cached)",
       .want_label = "prefix_cache"},
      {.name = "a queue longer than the cached part outweighs it",
       .loads = {{.idx = 0, .prefill_tokens = 0}, {.idx = 1, .prefill_tokens = 3000, .cached = 1920}},
       .num_prompt_tokens = 2000, .want_idx = 0, .want_label = "least_loaded"},
      {.name = "the longest cached prefix wins among equals",
       .loads = {{.idx = 0, .cached = 512}, {.idx = 1, .cached = 1024}, {.idx = 2, .cached = 256}},
       .num_prompt_tokens = 1100, .want_idx = 1, .want_label = "prefix_cache"},
      {.name = "cached, but least loaded anyway",
       .loads = {{.idx = 0, .prefill_tokens = 0, .cached = 64}, {.idx = 1, .prefill_tokens = 500}},
       .num_prompt_tokens = 100, .want_idx = 0, .want_label = "least_loaded"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto snapshot = Snapshot(WorkerRole::kPrefill, c.loads);
    const std::optional<RoutingDecision> decision = PickPrefill(snapshot, c.num_prompt_tokens);
    EXPECT_EQ(IdxOf(decision), c.want_idx);
    if (decision) {
      EXPECT_EQ(decision->worker.incarnation_id, absl::StrCat("w", *c.want_idx));
      EXPECT_THAT(decision->reason, HasSubstr(c.want_reason));
      if (!c.want_label.empty()) EXPECT_EQ(decision->label, c.want_label);
    }
  }
}

TEST(RoutingTest, Decode) {
  // 16-token blocks: a 31-token prompt + the first token needs 2 blocks, a 32-token one 3.
  const std::vector<Case> cases = {
      {.name = "none live", .loads = {}, .num_prompt_tokens = 10, .want_idx = std::nullopt},
      {.name = "fewest active among those with room",
       .loads = {{.idx = 0, .active = 1, .free_blocks = 9}, {.idx = 1, .active = 0, .free_blocks = 9}},
       .num_prompt_tokens = 31, .want_idx = 1, .want_reason = "room for 2 KV blocks"},
      {.name = "room beats fewer active",
       .loads = {{.idx = 0, .active = 0, .free_blocks = 1}, {.idx = 1, .active = 7, .free_blocks = 2}},
       .num_prompt_tokens = 31, .want_idx = 1},
      {.name = "exactly enough room counts",
       .loads = {{.idx = 0, .active = 0, .free_blocks = 2}, {.idx = 1, .active = 5, .free_blocks = 3}},
       .num_prompt_tokens = 32, .want_idx = 1},
      {.name = "none has room: fewest active, backpressure",
       .loads = {{.idx = 0, .active = 4, .free_blocks = 0}, {.idx = 1, .active = 2, .free_blocks = 1}},
       .num_prompt_tokens = 100, .want_idx = 1, .want_reason = "pulls when it has room"},
      {.name = "room measured in each instance's own block size",
       .loads = {{.idx = 0, .active = 0, .free_blocks = 2, .block_size = 16},
                 {.idx = 1, .active = 3, .free_blocks = 2, .block_size = 64}},
       .num_prompt_tokens = 40, .want_idx = 1},
      {.name = "tie: lowest index",
       .loads = {{.idx = 2, .active = 1, .free_blocks = 9}, {.idx = 0, .active = 1, .free_blocks = 9},
                 {.idx = 1, .active = 1, .free_blocks = 0}},
       .num_prompt_tokens = 8, .want_idx = 0},
      {.name = "outstanding prefill tokens do not matter",
       .loads = {{.idx = 0, .prefill_tokens = 1000, .active = 0, .free_blocks = 9},
                 {.idx = 1, .prefill_tokens = 0, .active = 1, .free_blocks = 9}},
       .num_prompt_tokens = 8, .want_idx = 0},
      {.name = "holding the whole prompt counts one request lighter",
       .loads = {{.idx = 0, .active = 2, .free_blocks = 9}, {.idx = 1, .active = 2, .free_blocks = 9, .cached = 64}},
       .num_prompt_tokens = 64, .want_idx = 1, .want_reason = "(64 cached)", .want_label = "prefix_cache"},
      {.name = "one request more and the whole prompt: a tie, lowest index",
       .loads = {{.idx = 0, .active = 2, .free_blocks = 9}, {.idx = 1, .active = 3, .free_blocks = 9, .cached = 64}},
       .num_prompt_tokens = 64, .want_idx = 0, .want_label = "least_loaded"},
      {.name = "half the prompt is half a request",
       .loads = {{.idx = 0, .active = 2, .free_blocks = 9, .cached = 32},
                 {.idx = 1, .active = 2, .free_blocks = 9, .cached = 48}},
       .num_prompt_tokens = 64, .want_idx = 1, .want_label = "prefix_cache"},
      {.name = "room beats the cache",
       .loads = {{.idx = 0, .active = 0, .free_blocks = 0, .cached = 64}, {.idx = 1, .active = 5, .free_blocks = 9}},
       .num_prompt_tokens = 64, .want_idx = 1, .want_label = "least_loaded"},
      {.name = "no room anywhere: labelled so",
       .loads = {{.idx = 0, .active = 1, .free_blocks = 0}}, .num_prompt_tokens = 64, .want_idx = 0,
       .want_label = "no_room"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto snapshot = Snapshot(WorkerRole::kDecode, c.loads);
    const std::optional<RoutingDecision> decision = PickDecode(snapshot, c.num_prompt_tokens);
    EXPECT_EQ(IdxOf(decision), c.want_idx);
    if (decision) {
      EXPECT_THAT(decision->reason, HasSubstr(c.want_reason));
      if (!c.want_label.empty()) EXPECT_EQ(decision->label, c.want_label);
    }
  }
}

TEST(RoutingTest, Colocated) {
  const std::vector<Case> cases = {
      {.name = "none live", .loads = {}, .want_idx = std::nullopt},
      {.name = "fewest active",
       .loads = {{.idx = 0, .active = 3}, {.idx = 1, .active = 1}, {.idx = 2, .active = 2}},
       .want_idx = 1, .want_reason = "fewest active requests (1)"},
      {.name = "KV room and prefill tokens do not matter",
       .loads = {{.idx = 0, .prefill_tokens = 500, .active = 0, .free_blocks = 0},
                 {.idx = 1, .active = 1, .free_blocks = 100}},
       .want_idx = 0},
      {.name = "tie: lowest index",
       .loads = {{.idx = 4, .active = 0}, {.idx = 3, .active = 0}}, .want_idx = 3},
      {.name = "the cache credit, as decode's",
       .loads = {{.idx = 0, .active = 1}, {.idx = 1, .active = 1, .cached = 100}}, .num_prompt_tokens = 100,
       .want_idx = 1, .want_reason = "(100 cached)", .want_label = "prefix_cache"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto snapshot = Snapshot(WorkerRole::kColocated, c.loads);
    const std::optional<RoutingDecision> decision = PickColocated(snapshot, c.num_prompt_tokens);
    EXPECT_EQ(IdxOf(decision), c.want_idx);
    if (decision) {
      EXPECT_THAT(decision->reason, HasSubstr(c.want_reason));
    }
  }
}

}  // namespace
}  // namespace baton::scheduler
