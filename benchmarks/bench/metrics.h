// What one request of a run recorded, and the latency metrics derived from it.
//
// Client times are seconds on std::chrono::steady_clock since the start of the run; server times
// are the server's own microseconds since the Unix epoch and are only ever subtracted from each
// other, so the two clocks are never compared.
//
// Definitions (DistServe's, also vLLM's benchmark_serving's):
//   TTFT  first token's arrival at the client - the request's scheduled arrival time. The scheduled
//         time, not the send time: a request that the client sent late (concurrency cap) waited all
//         the same, and the dispatch lag is reported apart.
//   TPOT  (last token - first token) / (num_output_tokens - 1): the mean of the gaps after the
//   first
//         token. None for a one-token output (such a request meets any TPOT objective).
//   ITL   every gap between successive entries of token_s: one entry per token when the protocol
//         says which tokens a response carries (gRPC: tokens of one response share its time, so
//         gaps of 0), one per streamed chunk otherwise (OpenAI SSE).
//   E2E   last token - scheduled arrival.
// Server phases (when the server reports them, as Baton's ServerTiming does):
//   queue         prefill start - arrival at the server
//   prefill       prefill end - prefill start
//   kv_transfer   KV transfer end - start (disaggregated only)
//   first_decode  second token's emission - max(prefill end, KV transfer end): the decode
//                 instance's wait and first step
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace baton::bench {

// Microseconds since the Unix epoch on the server; 0 when a phase did not happen.
struct ServerTiming {
  int64_t arrival_us = 0;
  int64_t prefill_start_us = 0;
  int64_t prefill_end_us = 0;
  int64_t kv_transfer_start_us = 0;
  int64_t kv_transfer_end_us = 0;
  std::vector<int64_t> token_emit_us;  // [num_output_tokens] when the server emitted each token
};

struct RequestRecord {
  int request_idx = 0;
  bool warmup = false;
  int input_len = 0;            // prompt tokens sent
  int output_len = 0;           // tokens asked for (max_tokens, ignore_eos)
  double arrival_s = 0;         // scheduled
  double sent_s = 0;            // when the client started the call
  double end_s = 0;             // when the stream ended (or failed)
  std::vector<double> token_s;  // [num_token_events] when each token (or chunk) reached the client
  int num_output_tokens = 0;    // tokens generated: the server's count if it gave one, else events
  int num_prompt_tokens = -1;   // the server's count, -1 when it gave none
  int num_cached_tokens = -1;   // prompt tokens the server's prefix cache held, -1 when unknown
  bool ok = false;              // the stream ended normally
  bool cancelled = false;       // stopped by the client (Ctrl-C), not a failure of the server
  std::string error;            // why it failed, empty when ok
  std::string finish_reason;    // "length", "stop", ... as the server said
  std::optional<ServerTiming> server;
};

struct PhaseBreakdown {
  double queue_s = 0;
  double prefill_s = 0;
  std::optional<double> kv_transfer_s;
  std::optional<double> first_decode_s;
};

struct RequestMetrics {
  double ttft_s = 0;
  double e2e_s = 0;
  std::optional<double> tpot_s;
  std::vector<double> itl_s;  // [num_token_events - 1]
  std::optional<PhaseBreakdown> phases;
};

// nullopt for a request that did not complete (not ok, or no token arrived).
std::optional<RequestMetrics> ComputeMetrics(const RequestRecord& record);

// nullopt unless the server reported arrival, prefill start and prefill end.
std::optional<PhaseBreakdown> ComputePhases(const ServerTiming& timing);

// How the client kept to the plan; filled by the runner.
struct DispatchStats {
  int max_concurrency = 0;        // the cap on requests in flight
  int max_in_flight = 0;          // the most requests that were in flight at once
  int num_delayed_by_cap = 0;     // requests that waited for a free slot
  double max_dispatch_lag_s = 0;  // the largest sent_s - arrival_s
  int num_not_sent = 0;           // requests never sent (the run was interrupted)
  bool interrupted = false;       // stopped early (Ctrl-C)
  double duration_s = 0;          // from the start of the run to the end of the last stream
};

}  // namespace baton::bench
