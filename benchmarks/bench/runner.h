// RunOpenLoop: sends a planned run to a GenerationClient, open loop — each request goes out at its
// arrival time whether or not earlier ones have finished — and records every token's arrival.
//
// Threads: the calling thread dispatches; each request in flight runs on a worker thread of a pool
// that grows on demand up to the number of requests in flight at once. When max_concurrency
// requests are in flight, the next waits for a free slot: the run is then no longer open loop, and
// DispatchStats counts how many requests waited (TTFT still counts from the planned arrival, see
// metrics.h). Timestamps are steady_clock seconds since the start of the run.
//
// Multi-turn sessions (PlannedRequest::session, prefix_workloads.h): a session's first turn is
// dispatched at its arrival, and the same worker then sends its later turns in order, each think_s
// after the previous one ended, its prompt the previous prompt, the answer's token ids (the client
// must report them: GenerationTrace::output_ids) and the turn's new message. A session holds one
// slot of max_concurrency while it lasts; a turn that fails ends its session (the rest are not
// sent). A later turn's arrival_s is when it was sent.
//
// Stopping: when *stop becomes true, no further request is sent, every request in flight is
// cancelled (recorded with cancelled = true and what it had received), and RunOpenLoop returns
// once they have all ended.
#pragma once

#include <atomic>
#include <functional>
#include <vector>

#include "absl/time/time.h"
#include "benchmarks/bench/client.h"
#include "benchmarks/bench/metrics.h"
#include "benchmarks/bench/plan.h"

namespace baton::bench {

// Live counters for a progress display; written by the runner, read by anyone.
struct RunProgress {
  std::atomic<int> num_sent = 0;
  std::atomic<int> num_completed = 0;
  std::atomic<int> num_failed = 0;
  std::atomic<int> num_in_flight = 0;
};

struct RunnerOptions {
  int max_concurrency = 512;  // requests in flight at once, >= 1
  absl::Duration request_timeout = absl::Seconds(600);
  const std::atomic<bool>* stop = nullptr;  // may be null; polled every few milliseconds
  RunProgress* progress = nullptr;          // may be null
  // Multi-turn over an API that streams text, not ids (OpenAI's): the ids a session appends to its
  // history for an answer, from the answer's text, as a chat client resends what it was shown.
  // Unset: a session needs the server's ids (Baton's gRPC API).
  std::function<std::vector<int32_t>(const std::string& text)> encode_answer;
};

struct RunResult {
  std::vector<RequestRecord> records;  // one per request sent, in plan order
  DispatchStats dispatch;
};

// Pre-condition: options.max_concurrency >= 1; plan sorted by arrival_s, but for later turns of
// sessions, which follow their session's first turn in turn order.
RunResult RunOpenLoop(GenerationClient& client, const std::vector<PlannedRequest>& plan,
                      const RunnerOptions& options);

}  // namespace baton::bench
