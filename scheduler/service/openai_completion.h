// OpenAI /v1/completions JSON <-> the scheduler's native types, in one place (no proto in between):
// the body becomes a GenerateRequest once, each GenerateChunk's fields become JSON, a status becomes
// an HTTP code. OpenAI's defaults apply (max_tokens 16, or the rest of the context when it is null;
// temperature 1); what JSON alone can get wrong (types, unsupported options) is InvalidArgument
// here, values are checked by ValidateRequest.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/batch/sequence.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/global/generate_chunk.h"
#include "scheduler/global/generate_request.h"

namespace baton::scheduler {

// How the client asked for the answer: Server-Sent Events or one JSON body.
struct CompletionStreaming {
  bool stream = false;         // "stream"
  bool include_usage = false;  // "stream_options": {"include_usage"}: a last chunk with usage
};

absl::StatusOr<GenerateRequest> CompletionToRequest(const nlohmann::json& body,
                                                    CompletionStreaming* streaming);

// The fields /v1/completions and /v1/chat/completions share: n (1 only), max_tokens (or
// max_completion_tokens; absent: `default_max_tokens`, nullopt or an explicit null: up to the
// context length), temperature, top_p, top_k, seed, stop, ignore_eos, stream, stream_options.
absl::Status ReadSamplingFields(const nlohmann::json& body, std::optional<int> default_max_tokens,
                                GenerateRequest* request, CompletionStreaming* streaming);

// "length", "stop", "abort"; nullptr for kNone (JSON null: not finished).
const char* FinishReasonName(runtime::FinishReason reason);

// OpenAI's completions logprobs object of a request's tokens, one chunk at a time: tokens,
// token_logprobs (the sampled token's, always present), top_logprobs, and text_offset, the
// characters (code points) of completion text before each token, which runs on across chunks.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(const runtime::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // The object for the tokens of `chunk`.
  nlohmann::json Next(const GenerateChunk& chunk);

 private:
  const runtime::Tokenizer& tokenizer_;
  int64_t text_offset_ = 0;
};

// 400 bad request, 404, 429 admission shed it, 503 no live worker, 504, 499 cancelled, else 500.
int HttpStatusOf(absl::StatusCode code);

}  // namespace baton::scheduler
