#include "scheduler/global/routing.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace baton::scheduler {
namespace {

// The KV blocks a decode instance needs for the prompt and the first token.
int BlocksNeeded(const InstanceSnapshot& instance, int num_prompt_tokens) {
  return (num_prompt_tokens + 1 + instance.block_size - 1) / instance.block_size;
}

// Active requests, one lighter for holding the whole prompt (decode and colocated load).
double RequestLoad(const InstanceSnapshot& instance, int num_prompt_tokens) {
  const int cached = std::min(instance.num_cached_tokens, num_prompt_tokens);
  return instance.num_active_requests - (num_prompt_tokens > 0 ? double(cached) / num_prompt_tokens : 0.0);
}

// Whether the cache credit changed the pick: without it, another instance would have won.
template <typename Key>
bool CreditDecided(std::span<const InstanceSnapshot> instances, const InstanceSnapshot& best, Key uncredited) {
  if (best.num_cached_tokens == 0) return false;
  return std::any_of(instances.begin(), instances.end(), [&](const InstanceSnapshot& other) {
    return &other != &best && uncredited(other) < uncredited(best);
  });
}

std::string CachedNote(const InstanceSnapshot& instance) {
  return instance.num_cached_tokens > 0 ? absl::StrCat(" (", instance.num_cached_tokens, " cached)") : "";
}

}  // namespace

std::optional<RoutingDecision> PickPrefill(std::span<const InstanceSnapshot> instances,
                                           int num_prompt_tokens) {
  auto to_compute = [num_prompt_tokens](const InstanceSnapshot& i) {
    return std::max<int64_t>(num_prompt_tokens - i.num_cached_tokens, 0);
  };
  auto key = [&](const InstanceSnapshot& i) {
    return std::pair(i.outstanding_prefill_tokens + to_compute(i), i.worker.instance_idx);
  };
  const InstanceSnapshot* best = nullptr;
  for (const InstanceSnapshot& instance : instances) {
    if (best == nullptr || key(instance) < key(*best)) best = &instance;
  }
  if (best == nullptr) return std::nullopt;
  const bool by_cache = CreditDecided(instances, *best, [](const InstanceSnapshot& i) {
    return std::pair(i.outstanding_prefill_tokens, i.worker.instance_idx);
  });
  return RoutingDecision{.worker = best->worker,
                         .reason = absl::StrCat("least prefill work: ", best->outstanding_prefill_tokens,
                                                " outstanding + ", to_compute(*best), " to compute",
                                                CachedNote(*best)),
                         .label = by_cache ? "prefix_cache" : "least_loaded"};
}

std::optional<RoutingDecision> PickDecode(std::span<const InstanceSnapshot> instances,
                                          int num_prompt_tokens) {
  auto has_room = [num_prompt_tokens](const InstanceSnapshot& i) {
    return i.num_kv_blocks_free >= BlocksNeeded(i, num_prompt_tokens);
  };
  auto key = [&](const InstanceSnapshot& i) {
    return std::tuple(!has_room(i), RequestLoad(i, num_prompt_tokens), i.worker.instance_idx);
  };
  const InstanceSnapshot* best = nullptr;
  for (const InstanceSnapshot& instance : instances) {
    if (best == nullptr || key(instance) < key(*best)) best = &instance;
  }
  if (best == nullptr) return std::nullopt;
  if (!has_room(*best)) {
    return RoutingDecision{.worker = best->worker,
                           .reason = absl::StrCat("no instance has room for the KV; fewest active requests (",
                                                  best->num_active_requests, ")", CachedNote(*best),
                                                  ", pulls when it has room"),
                           .label = "no_room"};
  }
  const bool by_cache = CreditDecided(instances, *best, [&](const InstanceSnapshot& i) {
    return std::tuple(!has_room(i), i.num_active_requests, i.worker.instance_idx);
  });
  return RoutingDecision{.worker = best->worker,
                         .reason = absl::StrCat("room for ", BlocksNeeded(*best, num_prompt_tokens),
                                                " KV blocks, fewest active requests (", best->num_active_requests,
                                                ")", CachedNote(*best)),
                         .label = by_cache ? "prefix_cache" : "least_loaded"};
}

std::optional<RoutingDecision> PickColocated(std::span<const InstanceSnapshot> instances,
                                             int num_prompt_tokens) {
  auto key = [&](const InstanceSnapshot& i) {
    return std::pair(RequestLoad(i, num_prompt_tokens), i.worker.instance_idx);
  };
  const InstanceSnapshot* best = nullptr;
  for (const InstanceSnapshot& instance : instances) {
    if (best == nullptr || key(instance) < key(*best)) best = &instance;
  }
  if (best == nullptr) return std::nullopt;
  const bool by_cache = CreditDecided(instances, *best, [](const InstanceSnapshot& i) {
    return std::pair(i.num_active_requests, i.worker.instance_idx);
  });
  return RoutingDecision{.worker = best->worker,
                         .reason = absl::StrCat("fewest active requests (", best->num_active_requests, ")",
                                                CachedNote(*best)),
                         .label = by_cache ? "prefix_cache" : "least_loaded"};
}

}  // namespace baton::scheduler
