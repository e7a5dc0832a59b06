// RequestRegistry: the worker's requests in flight, by the scheduler's request id: their engine
// sequence, the channel their tokens arrive on, and (prefill role) the lease on their held KV.
// Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/engine/token_channel.h"

namespace baton::runtime {

struct WorkerRequest {
  std::optional<SeqId> seq_id;
  std::shared_ptr<TokenChannel> channel = std::make_shared<TokenChannel>();
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  std::optional<absl::Time> kv_lease_deadline;  // prefill role, while the KV is held
  std::string kv_grant;  // prefill role, while the KV is held: the pulls' grant (kv_grants.h)
};

class RequestRegistry {
 public:
  // AlreadyExists if the id is in flight.
  absl::StatusOr<WorkerRequest> Add(const std::string& request_id);
  void SetSeqId(const std::string& request_id, SeqId seq_id);
  // Starts the lease on the request's held KV; false (and nothing set) when the request was
  // cancelled first (MarkCancelled) or is gone: the caller then frees the KV itself. Together with
  // MarkCancelled this decides, once, who frees a request's held KV.
  bool SetLease(const std::string& request_id, absl::Time deadline, std::string kv_grant);
  // Marks the request cancelled. nullopt if it is not in flight. If it holds KV under a lease it is
  // removed, and the returned request's kv_lease_deadline is set: the caller frees the KV.
  // Otherwise it stays, for the call serving it to clean up.
  std::optional<WorkerRequest> MarkCancelled(const std::string& request_id);
  std::optional<WorkerRequest> Find(const std::string& request_id) const;
  std::optional<WorkerRequest> Remove(const std::string& request_id);
  // Removes and returns the requests whose KV lease has passed.
  std::vector<WorkerRequest> TakeExpiredLeases(absl::Time now);
  int size() const;
  int NumHoldingKv() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, WorkerRequest> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::runtime
