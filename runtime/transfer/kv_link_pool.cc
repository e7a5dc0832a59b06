#include "runtime/transfer/kv_link_pool.h"

#include <vector>

namespace baton::runtime {

std::unique_ptr<PooledKvLink> KvLinkPool::Take(const std::string& address, int device,
                                               absl::Time now) {
  std::vector<std::unique_ptr<PooledKvLink>> expired;  // closed outside the lock
  std::unique_ptr<PooledKvLink> found;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = idle_.begin(); it != idle_.end();) {
      if (now - (*it)->last_used > max_idle_) {
        expired.push_back(std::move(*it));
        it = idle_.erase(it);
      } else if (found == nullptr && (*it)->address == address && (*it)->device == device) {
        found = std::move(*it);
        it = idle_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return found;
}

void KvLinkPool::Put(std::unique_ptr<PooledKvLink> link, absl::Time now) {
  std::vector<std::unique_ptr<PooledKvLink>> evicted;  // closed outside the lock
  link->last_used = now;
  {
    absl::MutexLock lock(&mu_);
    idle_.push_front(std::move(link));
    while (static_cast<int>(idle_.size()) > capacity_) {
      evicted.push_back(std::move(idle_.back()));
      idle_.pop_back();
    }
  }
}

int KvLinkPool::num_idle() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(idle_.size());
}

}  // namespace baton::runtime
