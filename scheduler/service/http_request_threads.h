// RequestThreads: the threads that run the HTTP server's handlers (http_server.h), one request each
// while it is answered (a completion blocks its thread until its last token). A request gets a
// thread of its own, made when no idle one is free, up to max_threads; past that, requests wait
// for a thread (HttpServer refuses more than max_threads in flight, so none waits long). A thread
// idle for idle_timeout ends, so that a burst's threads (their stacks, their malloc arenas) do not
// stay resident. Connections that are only open, or sending slowly, hold none.
#pragma once

#include <deque>
#include <functional>
#include <list>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace baton::scheduler {

class RequestThreads {
 public:
  explicit RequestThreads(size_t max_threads, absl::Duration idle_timeout = absl::Seconds(10))
      : max_threads_(max_threads), idle_timeout_(idle_timeout) {}
  ~RequestThreads() { Shutdown(); }

  void Enqueue(std::function<void()> task);
  // Lets the queued and running tasks finish, then joins every thread. A task enqueued after it runs
  // on the caller's thread.
  void Shutdown();

  size_t num_threads() const;  // running or idle

 private:
  struct Thread {
    std::thread thread;
    bool ended = false;  // Run returned: join it
  };
  void Run(Thread* self);
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinEnded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_threads_;
  const absl::Duration idle_timeout_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  size_t num_idle_ ABSL_GUARDED_BY(mu_) = 0;
  size_t num_live_ ABSL_GUARDED_BY(mu_) = 0;  // threads whose Run has not returned
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::list<Thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::scheduler
