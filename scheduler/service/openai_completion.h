// OpenAI /v1/completions JSON <-> the scheduler's native types, in one place (no proto in between):
// the body becomes a GenerateRequest once, each GenerateChunk's fields become JSON, a status becomes
// an HTTP code. OpenAI's defaults apply (max_tokens 16, or the rest of the context when it is null;
// temperature 1); what JSON alone can get wrong (types, unsupported options) is InvalidArgument
// here, values are checked by ValidateRequest.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/batch/sequence.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/global/generate_chunk.h"
#include "scheduler/global/generate_request.h"

namespace baton::scheduler {

// How the client asked for the answer: Server-Sent Events or one JSON body, how many choices.
struct AnswerShape {
  bool stream = false;         // "stream"
  bool include_usage = false;  // "stream_options": {"include_usage"}: a last chunk with usage
  int n = 1;                   // choices per prompt, 1..kMaxChoices
  // Candidates per prompt (completions' "best_of", >= n; not streamed): the n with the highest
  // cumulative logprob are returned.
  int best_of = 1;
  bool echo = false;  // completions: each choice's text starts with its prompt
  // Completions' echo with max_tokens 0 (how evaluation harnesses score a text): the prompt, and
  // its logprobs when asked, alone. The request generates one token, which the answer leaves out.
  bool echo_only = false;
  // vLLM's "prompt_logprobs" field (not streamed): the prompt's scores in vLLM's shape,
  // VllmPromptLogprobs.
  bool prompt_logprobs = false;
};

// The most requests one answer runs: prompts x best_of.
inline constexpr int kMaxChoices = 128;

// One request per prompt ("prompt": a string, a list of strings, a list of token ids or a list of
// lists of token ids); the answer's shape in *shape.
absl::StatusOr<std::vector<GenerateRequest>> CompletionToRequests(const nlohmann::json& body,
                                                                  AnswerShape* shape);

// The fields /v1/completions and /v1/chat/completions share: n, max_tokens (or
// max_completion_tokens; absent: `default_max_tokens`, nullopt or an explicit null: up to the
// context length), temperature, top_p, top_k, seed, stop, ignore_eos, stream, stream_options.
absl::Status ReadSamplingFields(const nlohmann::json& body, std::optional<int> default_max_tokens,
                                GenerateRequest* request, AnswerShape* shape);

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
  // The object for an echoed prompt, before the first chunk: `scores` is GenerateChunk's
  // prompt_logprobs; the first token, which nothing precedes, has null entries (OpenAI's).
  nlohmann::json Prompt(std::span<const int32_t> prompt_ids,
                        const std::vector<std::vector<kernels::TokenLogprob>>& scores);

 private:
  // The token's text, whose code points (as Python's len() counts what the client sees) advance
  // the text offset.
  std::string TokenText(int32_t id, nlohmann::json* offsets);

  const runtime::Tokenizer& tokenizer_;
  int64_t text_offset_ = 0;
};

// vLLM's prompt_logprobs answer: [num_prompt_tokens], null for the first token, then per token an
// object from token id (as a string) to {"logprob", "rank", "decoded_token"}: the prompt token and
// the most likely ones there. `scores` is GenerateChunk's prompt_logprobs.
nlohmann::json VllmPromptLogprobs(const runtime::Tokenizer& tokenizer,
                                  const std::vector<std::vector<kernels::TokenLogprob>>& scores);

// 400 bad request, 404, 429 admission shed it, 503 no live worker, 504, 499 cancelled, else 500.
int HttpStatusOf(absl::StatusCode code);

}  // namespace baton::scheduler
