// CallWatchdog: ends in-flight gRPC client calls whose callee is known dead. A blocking call (a unary
// call, or a stream's Read) cannot look at anything while it waits, and a worker frozen by SIGSTOP or
// cut off by the network keeps its TCP connection open and answers nothing: its callers would wait
// for their deadline (minutes). One thread polls every watched call's `abandon` predicate and
// TryCancel()s the context of each that answers true, so the caller gets its call back as soon as
// the registry marks the worker dead (scheduler/global/worker_client.h, CallOptions::abandon).
//
// Lifecycle: one per scheduler (WorkerStubs holds it); a Watch per call, declared after the call's
// context so that it is destroyed first. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace baton::scheduler {

class CallWatchdog {
 public:
  explicit CallWatchdog(absl::Duration poll_interval = absl::Milliseconds(50));
  ~CallWatchdog();  // stops the thread; every Watch must be gone
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // Watches one call while it lives.
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    // The predicate answered true and the call was cancelled.
    bool fired() const;

   private:
    friend class CallWatchdog;
    Watch(CallWatchdog* owner, uint64_t id) : owner_(owner), id_(id) {}
    CallWatchdog* owner_;  // null: nothing watched
    uint64_t id_;
  };

  // `context` is cancelled once `abandon` returns true (it is called on the watchdog's thread, with
  // the watchdog's lock held: it must not block). A null `abandon` watches nothing.
  std::unique_ptr<Watch> Start(grpc::ClientContext* context, std::function<bool()> abandon);

 private:
  struct Entry {
    grpc::ClientContext* context;
    std::function<bool()> abandon;
    bool fired = false;
  };

  void Run();

  const absl::Duration poll_interval_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace baton::scheduler
