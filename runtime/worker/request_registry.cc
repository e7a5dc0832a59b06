#include "runtime/worker/request_registry.h"

#include "absl/strings/str_cat.h"

namespace baton::runtime {

absl::StatusOr<WorkerRequest> RequestRegistry::Add(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = requests_.try_emplace(request_id);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("request ", request_id, " is already in flight"));
  }
  return it->second;
}

void RequestRegistry::SetSeqId(const std::string& request_id, SeqId seq_id) {
  absl::MutexLock lock(&mu_);
  if (auto it = requests_.find(request_id); it != requests_.end()) it->second.seq_id = seq_id;
}

bool RequestRegistry::SetLease(const std::string& request_id, absl::Time deadline,
                               std::string kv_grant) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end() || it->second.cancelled->load()) return false;
  it->second.kv_lease_deadline = deadline;
  it->second.kv_grant = std::move(kv_grant);
  return true;
}

std::optional<WorkerRequest> RequestRegistry::MarkCancelled(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  *it->second.cancelled = true;
  WorkerRequest request = it->second;
  if (request.kv_lease_deadline) requests_.erase(it);
  return request;
}

std::optional<WorkerRequest> RequestRegistry::Find(const std::string& request_id) const {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  return it->second;
}

std::optional<WorkerRequest> RequestRegistry::Remove(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  WorkerRequest request = std::move(it->second);
  requests_.erase(it);
  return request;
}

std::vector<WorkerRequest> RequestRegistry::TakeExpiredLeases(absl::Time now) {
  std::vector<WorkerRequest> expired;
  absl::MutexLock lock(&mu_);
  for (auto it = requests_.begin(); it != requests_.end();) {
    const WorkerRequest& request = it->second;
    if (request.kv_lease_deadline && *request.kv_lease_deadline <= now && request.seq_id) {
      expired.push_back(std::move(it->second));
      requests_.erase(it++);
    } else {
      ++it;
    }
  }
  return expired;
}

int RequestRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(requests_.size());
}

}  // namespace baton::runtime

namespace baton::runtime {

int RequestRegistry::NumHoldingKv() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, request] : requests_) n += request.kv_lease_deadline.has_value();
  return n;
}

}  // namespace baton::runtime
