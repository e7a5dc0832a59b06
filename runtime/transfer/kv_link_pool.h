// KvLinkPool: the decode side's bounded pool of warm KV links (kv_link.h), each with the control
// connection to the prefill rank's KvServer that it belongs to.
//
// Why a pool: a link is expensive to make (an NCCL communicator: a rendezvous, device memory for
// its buffers; vLLM's P2pNcclConnector keeps one per pair, ~100 MB each, forever) and cheap to
// reuse, so a decode rank keeps the links it used recently, keyed by (prefill rank address, its own
// device), and drops the least recently used beyond `capacity` and any idle past `max_idle` (set
// below the server's idle timeout, which closes the server's end). A link is taken out while a
// pull uses it, so two concurrent pulls to one prefill rank use two links; only idle links count
// against the capacity. Thread-safe.
#pragma once

#include <list>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/transfer/kv_link.h"
#include "runtime/transfer/socket_io.h"

namespace baton::runtime {

struct PooledKvLink {
  std::string address;  // the prefill rank's KvServer
  int device = 0;       // this side's CUDA device
  UniqueFd control;     // the connection the server's end of the link belongs to
  std::unique_ptr<KvLink> link;
  absl::Time last_used;
};

class KvLinkPool {
 public:
  KvLinkPool(int capacity, absl::Duration max_idle) : capacity_(capacity), max_idle_(max_idle) {}

  // The most recently used idle link to (address, device) not idle past max_idle, or nullptr.
  std::unique_ptr<PooledKvLink> Take(const std::string& address, int device, absl::Time now);
  // Returns a link that is still good after a pull; then drops the least recently used beyond
  // capacity (closing them).
  void Put(std::unique_ptr<PooledKvLink> link, absl::Time now);

  int num_idle() const;

 private:
  const int capacity_;
  const absl::Duration max_idle_;
  mutable absl::Mutex mu_;
  std::list<std::unique_ptr<PooledKvLink>> idle_ ABSL_GUARDED_BY(mu_);  // most recent first
};

}  // namespace baton::runtime
