// KvAdmissionQueue: handed-off requests (decode role) waiting for room in the engine's KV pool.
//
// Lifecycle of one request:
//  1. The thread serving the request makes a KvAdmissionTicket and hands it to the engine thread
//     once (EngineLoop::Post -> Enqueue). Enqueue validates the request at once: an invalid one is
//     answered with its error and never queued, so every queued request fits in an empty pool.
//  2. The engine thread calls AdmitReady() before every step and on every tick (an EngineLoop
//     hook). It admits queued requests in FIFO order while the head fits; an admission allocates
//     the destination blocks and answers the ticket with the SeqId, the block ids and the pools, in
//     one go.
//  3. The serving thread waits in KvAdmissionTicket::Wait with its deadline, polling its
//     cancellation probe. On deadline or cancellation it abandons the ticket: if the engine has not
//     admitted it yet, the engine thread drops it on its next AdmitReady and never admits it; if the
//     admission raced in first, Wait frees the admitted sequence through `free_admitted`. Either way
//     no blocks leak.
//
// Order: strict head-of-line FIFO, as vLLM's waiting queue. When the head does not fit, nothing
// behind it is admitted, even a request small enough to fit: otherwise a steady stream of small
// requests could take every block as it frees and starve a large one for ever. The price is that
// small requests wait behind a large one; the head always fits once enough running sequences finish
// (step 1 guarantees it fits in the whole pool), so the queue always moves.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/batch/sequence.h"
#include "runtime/kv_cache/block_allocator.h"
#include "runtime/kv_cache/kv_pool.h"

namespace baton::runtime {

// A request whose prompt KV was computed by a prefill instance.
struct PrefilledRequest {
  std::vector<int32_t> prompt_token_ids;     // [num_prompt_tokens]
  std::vector<int32_t> generated_token_ids;  // tokens sampled so far (at least one)
  GenerationParams params;
};

// What an admission hands back: the engine sequence that owns the destination blocks.
struct KvAdmission {
  SeqId seq_id = 0;
  std::vector<BlockId> blocks;  // [ceil(num_prompt_tokens / block_size)] destination, token order
  // The leading blocks whose KV the instance's prefix cache holds already: not to be pulled.
  int num_cached_blocks = 0;
  // [num_ranks] each rank's pool, by rank_idx; the blocks are the same ids in every one. The pools
  // outlive the engine's sequences.
  std::vector<const KvPool*> pools;
};

// The engine operations the queue drives. Implemented over Engine by the worker and faked in tests.
// Engine thread only.
class KvAdmitter {
 public:
  virtual ~KvAdmitter() = default;
  // OK if the request could be admitted into an empty pool; else the engine's InvalidArgument.
  virtual absl::Status Validate(const PrefilledRequest& request) const = 0;
  // Whether Admit would find the blocks free now.
  virtual bool CanAdmit(const PrefilledRequest& request) const = 0;
  // Allocates the destination blocks for a request CanAdmit accepted.
  virtual absl::StatusOr<KvAdmission> Admit(PrefilledRequest request) = 0;
};

// One request's place in the queue, shared by the thread serving it and the engine thread.
// Thread-safe.
class KvAdmissionTicket {
 public:
  explicit KvAdmissionTicket(PrefilledRequest request) : request_(std::move(request)) {}
  KvAdmissionTicket(const KvAdmissionTicket&) = delete;
  KvAdmissionTicket& operator=(const KvAdmissionTicket&) = delete;

  struct WaitParams {
    absl::Time deadline;                  // required
    std::function<bool()> is_cancelled;   // polled every poll_interval; null: never cancelled
    absl::Duration poll_interval = absl::Milliseconds(20);
    // Frees a sequence that was admitted after all (deadline or cancellation raced the admission).
    // Called on the waiting thread, at most once; must not block (e.g. post the free to the engine).
    std::function<void(SeqId)> free_admitted;
  };
  // Serving thread, once. The admission, or the ticket's error (an invalid request, a failed
  // admission), DeadlineExceeded "no KV room before the deadline", or Cancelled "cancelled while
  // waiting for KV room". Deadline and cancellation are checked before a result is taken, so once
  // either has happened the admission is never returned (it is freed instead). Returns within
  // poll_interval of a cancellation and at the deadline.
  absl::StatusOr<KvAdmission> Wait(const WaitParams& params);

 private:
  friend class KvAdmissionQueue;
  enum class Outcome { kBlocked, kAnswered, kDropped };
  // Engine thread. kDropped if abandoned (nothing admitted); kBlocked if the request does not fit
  // now; otherwise admits (or fails to) and answers the waiter: kAnswered.
  Outcome TryAdmit(KvAdmitter& admitter);
  // Engine thread: answers the waiter with an error without admitting.
  void Reject(absl::Status status);
  bool abandoned() const;

  mutable absl::Mutex mu_;
  PrefilledRequest request_ ABSL_GUARDED_BY(mu_);  // moved into Admit
  std::optional<absl::StatusOr<KvAdmission>> result_ ABSL_GUARDED_BY(mu_);
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // the waiter gave up; never admit
};

// The FIFO of tickets. Not thread-safe: engine thread only (inside EngineLoop Post/Call/hooks).
class KvAdmissionQueue {
 public:
  // Validates the request and queues it at the tail, or answers it with the validation error.
  void Enqueue(std::shared_ptr<KvAdmissionTicket> ticket, const KvAdmitter& admitter);
  // Drops abandoned tickets, then admits from the head while the head fits (see the order above).
  void AdmitReady(KvAdmitter& admitter);
  // Tickets queued, abandoned ones included until the next AdmitReady.
  int size() const { return static_cast<int>(tickets_.size()); }

 private:
  std::deque<std::shared_ptr<KvAdmissionTicket>> tickets_;
};

}  // namespace baton::runtime
