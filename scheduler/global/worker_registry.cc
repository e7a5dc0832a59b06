#include "scheduler/global/worker_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace baton::scheduler {
namespace {

WorkerRef RefOf(const WorkerEntry& worker) {
  return WorkerRef{.incarnation_id = worker.incarnation_id,
                   .address = worker.address,
                   .role = worker.role,
                   .instance_idx = worker.instance_idx};
}

}  // namespace

WorkerRegistry::WorkerRegistry(std::vector<std::pair<WorkerRole, int>> expected,
                               absl::Duration liveness_timeout)
    : expected_(std::move(expected)), liveness_timeout_(liveness_timeout) {}

void WorkerRegistry::Register(WorkerEntry entry, absl::Time now) {
  absl::MutexLock lock(&mu_);
  // A new incarnation of the same instance replaces the old one.
  for (auto it = workers_.begin(); it != workers_.end();) {
    const WorkerEntry& old = it->second;
    if (old.role == entry.role && old.instance_idx == entry.instance_idx &&
        old.incarnation_id != entry.incarnation_id) {
      prefix_index_.Forget(old.incarnation_id);
      workers_.erase(it++);
    } else {
      ++it;
    }
  }
  entry.last_seen = now;
  entry.alive = true;
  std::string id = entry.incarnation_id;
  auto [it, inserted] = workers_.try_emplace(id, std::move(entry));
  if (!inserted) {
    it->second.last_seen = now;
    it->second.alive = true;
  }
}

bool WorkerRegistry::Heartbeat(const std::string& incarnation_id, const WorkerLoad& load,
                               absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(incarnation_id);
  if (it == workers_.end() || !it->second.alive) return false;
  it->second.reported = load;
  it->second.last_seen = now;
  it->second.suspected = false;
  return true;
}

void WorkerRegistry::MarkDead(const std::string& incarnation_id, const std::string& why) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(incarnation_id);
  if (it == workers_.end() || !it->second.alive) return;
  it->second.alive = false;
  it->second.death = why;
  prefix_index_.Forget(incarnation_id);
}

bool WorkerRegistry::MarkExited(WorkerRole role, int instance_idx, int pid, const std::string& why) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, worker] : workers_) {
    if (worker.alive && worker.role == role && worker.instance_idx == instance_idx && worker.pid == pid) {
      worker.alive = false;
      worker.death = why;
      prefix_index_.Forget(id);
      return true;
    }
  }
  return false;
}

std::vector<WorkerRegistry::Suspect> WorkerRegistry::Suspects(absl::Time now) {
  std::vector<Suspect> suspects;
  absl::MutexLock lock(&mu_);
  for (auto& [id, worker] : workers_) {
    if (!worker.alive || worker.suspected || now - worker.last_seen <= liveness_timeout_) continue;
    worker.suspected = true;
    suspects.push_back(Suspect{
        .worker = RefOf(worker),
        .pid = worker.pid,
        .name = absl::StrCat(WorkerName(worker.role, worker.instance_idx), " (pid ", worker.pid, ")"),
        .silence = now - worker.last_seen});
  }
  return suspects;
}

void WorkerRegistry::Vouch(const std::string& incarnation_id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(incarnation_id);
  if (it == workers_.end() || !it->second.alive) return;
  it->second.suspected = false;
  it->second.last_seen = std::max(it->second.last_seen, now);
}

void WorkerRegistry::ApplyCacheEvents(const std::string& incarnation_id,
                                      const runtime::BlockAllocator::CacheEvents& events) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(incarnation_id);
  if (it == workers_.end() || !it->second.alive) return;
  // A cache holds at most the instance's blocks: more in the view means removals were lost.
  prefix_index_.Apply(incarnation_id, events,
                      static_cast<size_t>(std::max(it->second.reported.num_kv_blocks_total, 1)));
}

std::vector<InstanceSnapshot> WorkerRegistry::LiveInstances(WorkerRole role, PromptHashes* prompt) const {
  absl::ReaderMutexLock lock(&mu_);
  return SnapshotsLocked(role, prompt);
}

std::optional<RoutingDecision> WorkerRegistry::PickPrefillAndCharge(PromptHashes* prompt, int num_prompt_tokens) {
  absl::MutexLock lock(&mu_);
  std::optional<RoutingDecision> pick = PickPrefill(SnapshotsLocked(WorkerRole::kPrefill, prompt), num_prompt_tokens);
  if (pick) workers_.at(pick->worker.incarnation_id).outstanding_prefill_tokens += num_prompt_tokens;
  return pick;
}

std::vector<InstanceSnapshot> WorkerRegistry::SnapshotsLocked(WorkerRole role, PromptHashes* prompt) const {
  std::vector<InstanceSnapshot> instances;
  {
    for (const auto& [id, worker] : workers_) {
      if (!worker.alive || worker.role != role) continue;
      InstanceSnapshot& instance = instances.emplace_back(InstanceSnapshot{
          .worker = RefOf(worker),
          .block_size = worker.block_size,
          .num_kv_blocks_free = worker.reported.num_kv_blocks_total - worker.reported.num_kv_blocks_used,
          .outstanding_prefill_tokens = worker.outstanding_prefill_tokens,
          .num_active_requests = worker.num_active_requests});
      if (prompt != nullptr && !worker.prefix_cache_salt.empty()) {
        instance.num_cached_tokens =
            prefix_index_.MatchedBlocks(id, prompt->For(worker.prefix_cache_salt, worker.block_size)) *
            worker.block_size;
      }
    }
  }
  std::sort(instances.begin(), instances.end(), [](const auto& a, const auto& b) {
    return a.worker.instance_idx < b.worker.instance_idx;
  });
  return instances;
}

void WorkerRegistry::AddPrefillLoad(const std::string& incarnation_id, int64_t num_tokens) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(incarnation_id); it != workers_.end()) {
    it->second.outstanding_prefill_tokens += num_tokens;
  }
}

void WorkerRegistry::AddActive(const std::string& incarnation_id, int delta) {
  absl::MutexLock lock(&mu_);
  if (auto it = workers_.find(incarnation_id); it != workers_.end()) {
    it->second.num_active_requests += delta;
  }
}

std::optional<InstanceLoad> WorkerRegistry::LoadOf(const WorkerRef& worker) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = workers_.find(worker.incarnation_id);
  if (it == workers_.end() || !it->second.alive) return std::nullopt;
  const WorkerEntry& entry = it->second;
  return InstanceLoad{.name = WorkerName(entry.role, entry.instance_idx),
                      .outstanding_prefill_tokens = entry.outstanding_prefill_tokens,
                      .num_active_requests = entry.num_active_requests};
}

std::optional<runtime::ParallelLayout> WorkerRegistry::LayoutOf(const WorkerRef& worker) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = workers_.find(worker.incarnation_id);
  if (it == workers_.end()) return std::nullopt;
  return it->second.layout;
}

std::vector<InstanceLoad> WorkerRegistry::LiveLoads(WorkerRole role) const {
  std::vector<std::pair<int, InstanceLoad>> by_idx;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [id, worker] : workers_) {
      if (!worker.alive || worker.role != role) continue;
      by_idx.emplace_back(worker.instance_idx,
                          InstanceLoad{.name = WorkerName(worker.role, worker.instance_idx),
                                       .outstanding_prefill_tokens = worker.outstanding_prefill_tokens,
                                       .num_active_requests = worker.num_active_requests});
    }
  }
  std::sort(by_idx.begin(), by_idx.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<InstanceLoad> loads;
  for (auto& [idx, load] : by_idx) loads.push_back(std::move(load));
  return loads;
}

int WorkerRegistry::NumActive(const std::string& incarnation_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = workers_.find(incarnation_id);
  return it == workers_.end() ? 0 : it->second.num_active_requests;
}

WorkerRegistry::Health WorkerRegistry::CheckHealth() const {
  Health health{.all_phases_served = true, .all_expected_alive = true};
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [role, count] : expected_) {
    int num_alive = 0;
    for (int idx = 0; idx < count; ++idx) {
      const WorkerEntry* entry = nullptr;
      for (const auto& [id, worker] : workers_) {
        if (worker.role == role && worker.instance_idx == idx) entry = &worker;
      }
      if (entry == nullptr) {
        health.problems.push_back(absl::StrCat(WorkerName(role, idx), " has not registered"));
      } else if (!entry->alive) {
        health.problems.push_back(absl::StrCat(WorkerName(role, idx), " (pid ", entry->pid,
                                               ") is down: ", entry->death));
      } else {
        ++num_alive;
      }
    }
    if (num_alive < count) health.all_expected_alive = false;
    if (num_alive == 0) health.all_phases_served = false;
  }
  return health;
}

std::vector<WorkerEntry> WorkerRegistry::Snapshot() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<WorkerEntry> entries;
  for (const auto& [id, worker] : workers_) entries.push_back(worker);
  return entries;
}

}  // namespace baton::scheduler
