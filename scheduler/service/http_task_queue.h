// ConnectionThreads: the HTTP server's task queue (httplib runs one task per connection, for as
// long as the connection lives). httplib's own pool has a fixed number of threads, so that many
// slow clients (slowloris: a byte every few seconds, each under the read timeout) starved every
// other client. Here a connection gets a thread of its own, made when no idle one is free, up to
// max_threads (default: far above what slow clients on one host can hold open); past that,
// connections wait for a thread. Threads stay once made, idle, until shutdown.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "httplib.h"

namespace baton::scheduler {

class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> task) override;
  // Lets the queued and running tasks finish, then joins every thread.
  void shutdown() override;

  size_t num_threads() const;

 private:
  void Run();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_threads_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  size_t num_idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::scheduler
