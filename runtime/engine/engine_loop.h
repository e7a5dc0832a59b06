// EngineLoop: runs an Engine on a thread of its own, the only thread that touches it.
//
// Other threads hand it work with Call() (run a function on the engine thread between two steps
// and wait for its result) or Post() (the same, without waiting), and get a request's tokens
// through the TokenSink they subscribed for the sequence. Each turn of the loop runs the posted
// tasks, then the hooks (the worker's: lease expiry, KV admissions that wait for free blocks), then
// one step if the engine has work. With no work it sleeps until a task is posted or the next tick.
// If a step fails, every subscribed sequence receives the error and is cancelled; the loop goes on.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/engine/engine.h"

namespace baton::runtime {

// Receives a sequence's outputs on the engine thread; must not block.
using TokenSink = std::function<void(absl::StatusOr<TokenOutput>)>;

class EngineLoop {
 public:
  explicit EngineLoop(std::unique_ptr<Engine> engine, absl::Duration tick = absl::Milliseconds(5));
  // Stops the thread. Tasks still pending are dropped unrun (a Call() waiting on one would get a
  // broken promise), so destroy the loop only once no other thread can be inside Call() or Post().
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Runs fn(engine) on the engine thread and returns its result. Not from the engine thread.
  template <typename Fn>
  auto Call(Fn fn) -> decltype(fn(std::declval<Engine&>())) {
    using Result = decltype(fn(std::declval<Engine&>()));
    auto task = std::make_shared<std::packaged_task<Result(Engine&)>>(std::move(fn));
    std::future<Result> result = task->get_future();
    Post([task](Engine& engine) { (*task)(engine); });
    return result.get();
  }

  // Runs fn(engine) on the engine thread, later; returns at once.
  void Post(std::function<void(Engine&)> fn);

  // Engine-thread only (inside Call/Post/hooks): route a sequence's outputs to sink until it
  // finishes or Unsubscribe.
  void Subscribe(SeqId seq_id, TokenSink sink);
  void Unsubscribe(SeqId seq_id);
  // Engine-thread only (a sink may call it): Engine::Pause, for a consumer that fell behind.
  void Pause(SeqId seq_id) { (void)engine_->Pause(seq_id); }
  // Engine::PrecompileConstraint, from the caller's thread (it is thread-safe).
  absl::Status PrecompileConstraint(const OutputConstraint& constraint) const {
    return engine_->PrecompileConstraint(constraint);
  }

  // Runs hook(engine) on the engine thread on every turn of the loop: after the posted tasks, so
  // before every step, and at least once per tick while idle. Hooks run in the order added.
  void AddHook(std::function<void(Engine&)> hook);

  // A snapshot taken after every step, readable from any thread.
  struct Stats {
    int num_blocks_total = 0;
    int num_blocks_used = 0;
    int num_waiting = 0;
    int num_running = 0;
    int num_swapped = 0;  // preempted, KV in the swap space
    int num_paused = 0;   // out of the batch: their consumers fell behind (Engine::Pause)
    int num_sequences = 0;
    int64_t num_prefix_cache_queries = 0;  // tokens, since the engine started (Engine)
    int64_t num_prefix_cache_hits = 0;
  };
  Stats stats() const;

  // The prefix cache's events since the last call, gathered after every step (Engine::
  // TakeCacheEvents), for the worker's heartbeat. RequestCacheSnapshot: the next events are a reset
  // naming every cached block (the scheduler's view was lost or never built). At most
  // kMaxCacheEvents are kept between two takes; more turn into a snapshot, itself cut to that many.
  BlockAllocator::CacheEvents TakeCacheEvents();
  void RequestCacheSnapshot();
  static constexpr int kMaxCacheEvents = 1 << 16;

 private:
  void Run();
  void UpdateStats();

  std::unique_ptr<Engine> engine_;
  const absl::Duration tick_;
  mutable absl::Mutex mu_;
  std::vector<std::function<void(Engine&)>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  BlockAllocator::CacheEvents cache_events_ ABSL_GUARDED_BY(mu_);
  bool cache_snapshot_requested_ ABSL_GUARDED_BY(mu_) = false;
  // Engine thread only.
  absl::flat_hash_map<SeqId, TokenSink> sinks_;
  std::vector<std::function<void(Engine&)>> hooks_;
  std::thread thread_;
};

}  // namespace baton::runtime
