// GenerationClient: one streaming generation call against a serving endpoint, as the load
// generator needs it — send a prompt, force the output length, and timestamp every token as it
// arrives. Implementations: GrpcClient (Baton's InferenceService, client_grpc.h) and OpenAiClient
// (any OpenAI-compatible /v1/completions with SSE streaming: Baton's HTTP front end, vLLM, SGLang;
// client_openai.h).
//
// Lifecycle: create one client per endpoint; call Generate from as many threads as there are
// requests in flight (implementations are thread-safe). A Cancellation, shared between the calling
// thread and the one that may stop it, ends a call early.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "benchmarks/bench/metrics.h"

namespace baton::bench {

using Clock = std::chrono::steady_clock;

struct GenerationRequest {
  std::string request_id;
  std::vector<int32_t> prompt_ids;  // [num_prompt_tokens]; sent as ids unless prompt_text is set
  std::string prompt_text;          // non-empty: sent as text instead of the ids
  int max_tokens = 1;               // >= 1
  bool ignore_eos = true;           // forces exactly max_tokens
  absl::Duration timeout = absl::Seconds(600);  // for the whole call
};

// What a call observed. Filled as the stream goes, so a failed or cancelled call keeps what came.
struct GenerationTrace {
  std::vector<Clock::time_point> token_times;  // [num_token_events], see metrics.h for "event"
  int num_output_tokens = 0;   // the server's count when it gives one, else token events
  int num_prompt_tokens = -1;  // the server's count, -1 when unknown
  int num_cached_tokens = -1;  // prompt tokens a server's prefix cache held, -1 when unknown
  // The generated tokens' ids, when the server sends them (Baton's gRPC API): a multi-turn
  // session's next prompt carries them (plan.h).
  std::vector<int32_t> output_ids;
  std::string output_text;  // the generated text, when the server streams text (the OpenAI APIs)
  std::string finish_reason;
  std::optional<ServerTiming> server;  // when the server reports its timing
};

// Cancels a call from another thread. Thread-safe. Cancel before the call registered its hook makes
// the registration cancel at once.
class Cancellation {
 public:
  // Called by the client while a call runs; the hook must be safe to call from another thread
  // until ClearHook returns.
  void SetHook(std::function<void()> hook);
  void ClearHook();
  void Cancel();
  bool cancelled() const;

 private:
  mutable std::mutex mu_;
  std::function<void()> hook_;
  bool cancelled_ = false;
};

struct ModelInfo {
  std::string model;      // the served model's name ("" if unknown)
  int max_model_len = 0;  // 0 if the server does not say
};

class GenerationClient {
 public:
  virtual ~GenerationClient() = default;

  // Runs one streaming call to completion, filling *trace. OK when the stream ended normally;
  // Cancelled after cancel->Cancel(); DeadlineExceeded after request.timeout; the server's or the
  // transport's error otherwise (Unavailable when the endpoint cannot be reached).
  virtual absl::Status Generate(const GenerationRequest& request, Cancellation* cancel,
                                GenerationTrace* trace) = 0;

  // What the endpoint serves. Unavailable when it cannot be reached.
  virtual absl::StatusOr<ModelInfo> GetModelInfo() = 0;
};

}  // namespace baton::bench
