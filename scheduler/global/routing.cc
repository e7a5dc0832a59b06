#include "scheduler/global/routing.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace baton::scheduler {
namespace {

// The KV blocks a decode instance needs for the prompt and the first token.
int BlocksNeeded(const InstanceSnapshot& instance, int num_prompt_tokens) {
  return (num_prompt_tokens + 1 + instance.block_size - 1) / instance.block_size;
}

}  // namespace

std::optional<RoutingDecision> PickPrefill(std::span<const InstanceSnapshot> instances) {
  const InstanceSnapshot* best = nullptr;
  auto key = [](const InstanceSnapshot& i) {
    return std::pair(i.outstanding_prefill_tokens, i.worker.instance_idx);
  };
  for (const InstanceSnapshot& instance : instances) {
    if (best == nullptr || key(instance) < key(*best)) best = &instance;
  }
  if (best == nullptr) return std::nullopt;
  return RoutingDecision{.worker = best->worker,
                         .reason = absl::StrCat("fewest outstanding prefill tokens (",
                                                best->outstanding_prefill_tokens, ")")};
}

std::optional<RoutingDecision> PickDecode(std::span<const InstanceSnapshot> instances,
                                          int num_prompt_tokens) {
  const InstanceSnapshot* best = nullptr;
  bool best_has_room = false;
  auto key = [](const InstanceSnapshot& i) {
    return std::pair(i.num_active_requests, i.worker.instance_idx);
  };
  for (const InstanceSnapshot& instance : instances) {
    const bool has_room = instance.num_kv_blocks_free >= BlocksNeeded(instance, num_prompt_tokens);
    if (best == nullptr || (has_room && !best_has_room) ||
        (has_room == best_has_room && key(instance) < key(*best))) {
      best = &instance;
      best_has_room = has_room;
    }
  }
  if (best == nullptr) return std::nullopt;
  return RoutingDecision{
      .worker = best->worker,
      .reason = best_has_room
                    ? absl::StrCat("room for ", BlocksNeeded(*best, num_prompt_tokens),
                                   " KV blocks, fewest active requests (", best->num_active_requests,
                                   ")")
                    : absl::StrCat("no instance has room for the KV; fewest active requests (",
                                   best->num_active_requests, "), pulls when it has room")};
}

std::optional<RoutingDecision> PickColocated(std::span<const InstanceSnapshot> instances) {
  const InstanceSnapshot* best = nullptr;
  auto key = [](const InstanceSnapshot& i) {
    return std::pair(i.num_active_requests, i.worker.instance_idx);
  };
  for (const InstanceSnapshot& instance : instances) {
    if (best == nullptr || key(instance) < key(*best)) best = &instance;
  }
  if (best == nullptr) return std::nullopt;
  return RoutingDecision{.worker = best->worker,
                         .reason = absl::StrCat("fewest active requests (",
                                                best->num_active_requests, ")")};
}

}  // namespace baton::scheduler
