#include "runtime/engine/engine_loop.h"

#include <utility>

namespace baton::runtime {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, absl::Duration tick)
    : engine_(std::move(engine)), tick_(tick) {
  UpdateStats();
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void EngineLoop::Post(std::function<void(Engine&)> fn) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(fn));
}

void EngineLoop::Subscribe(SeqId seq_id, TokenSink sink) { sinks_[seq_id] = std::move(sink); }

void EngineLoop::Unsubscribe(SeqId seq_id) { sinks_.erase(seq_id); }

void EngineLoop::AddHook(std::function<void(Engine&)> hook) {
  Post([this, hook = std::move(hook)](Engine&) mutable { hooks_.push_back(std::move(hook)); });
}

EngineLoop::Stats EngineLoop::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void EngineLoop::UpdateStats() {
  Stats stats{.num_blocks_total = engine_->allocator().num_blocks(),
              .num_blocks_used = engine_->allocator().num_blocks_used(),
              .num_waiting = engine_->num_waiting(),
              .num_running = engine_->num_running(),
              .num_swapped = engine_->num_swapped(),
              .num_paused = engine_->num_paused(),
              .num_sequences = engine_->num_sequences(),
              .num_prefix_cache_queries = engine_->num_prefix_cache_queries(),
              .num_prefix_cache_hits = engine_->num_prefix_cache_hits()};
  absl::MutexLock lock(&mu_);
  stats_ = stats;
  if (!engine_->prefix_caching()) return;
  BlockAllocator::CacheEvents events = engine_->TakeCacheEvents(std::exchange(cache_snapshot_requested_, false));
  if (events.reset) {
    // A heartbeat stays bounded: a view short of some blocks only costs recomputes.
    if (events.events.size() > kMaxCacheEvents) events.events.resize(kMaxCacheEvents);
    cache_events_ = std::move(events);
  } else if (cache_events_.events.size() + events.events.size() > kMaxCacheEvents) {
    cache_events_ = {};  // nobody took them in time: a snapshot replaces them
    cache_snapshot_requested_ = true;
  } else {
    cache_events_.events.insert(cache_events_.events.end(), events.events.begin(), events.events.end());
  }
}

BlockAllocator::CacheEvents EngineLoop::TakeCacheEvents() {
  absl::MutexLock lock(&mu_);
  return std::exchange(cache_events_, {});
}

void EngineLoop::RequestCacheSnapshot() {
  absl::MutexLock lock(&mu_);
  cache_snapshot_requested_ = true;
}

void EngineLoop::Run() {
  while (true) {
    std::vector<std::function<void(Engine&)>> tasks;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this] { return stopping_ || !tasks_.empty(); };
      if (!engine_->HasWork()) mu_.AwaitWithTimeout(absl::Condition(&ready), tick_);
      if (stopping_) return;
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task(*engine_);
    for (auto& hook : hooks_) hook(*engine_);
    if (!engine_->HasWork()) {
      UpdateStats();
      continue;
    }
    absl::StatusOr<std::vector<TokenOutput>> outputs = engine_->Step();
    if (!outputs.ok()) {
      // An engine failure: every subscribed request ends with it.
      for (auto& [seq_id, sink] : sinks_) {
        (void)engine_->Cancel(seq_id);
        sink(outputs.status());
      }
      sinks_.clear();
    } else {
      for (TokenOutput& out : *outputs) {
        auto it = sinks_.find(out.seq_id);
        if (it == sinks_.end()) continue;
        const bool finished = out.finish_reason != FinishReason::kNone;
        it->second(std::move(out));
        if (finished) sinks_.erase(it);
      }
    }
    UpdateStats();
  }
}

}  // namespace baton::runtime
