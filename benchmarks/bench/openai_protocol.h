// The OpenAI completions and chat completions APIs as the load generator speaks them (POST
// /v1/completions or /v1/chat/completions with "stream": true;
// https://platform.openai.com/docs/api-reference/completions, .../chat): the request bodies, and the
// meaning of each streamed chunk (text_completion or chat.completion.chunk). Pure functions, no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "benchmarks/bench/client.h"

namespace baton::bench {

// The JSON body: model (omitted when empty), prompt (token ids, or text when prompt_text is set),
// max_tokens, temperature 0, stream true with usage in the last chunk (stream_options
// include_usage), and ignore_eos — not in OpenAI's spec, but what vLLM, SGLang and Baton accept to
// force the output length.
std::string CompletionRequestBody(const GenerationRequest& request, const std::string& model);

// The chat completions body, as vLLM's benchmark (backend openai-chat) sends it: the prompt text as
// one user message, max_completion_tokens, temperature 0, stream with usage, ignore_eos.
// Pre-condition: request.prompt_text is set (a chat message is text, not token ids).
std::string ChatCompletionRequestBody(const GenerationRequest& request, const std::string& model);

struct CompletionChunk {
  bool done = false;                     // the "[DONE]" sentinel
  int num_choices = 0;                   // 0 for the final usage-only chunk
  // Whether the chunk carries output, what the bench times as a token event: a completion chunk
  // with a choice, unless it is a finish-only last one (empty text and a finish reason, as
  // llama-server ends a stream); a chat chunk whose delta has content (not the role-only first
  // chunk some servers send, nor a finish-only last one), as vLLM's benchmark counts them.
  bool has_output = false;
  std::string text;                      // choices[0].text, or choices[0].delta.content (chat)
  std::string finish_reason;             // choices[0].finish_reason when not null
  std::optional<int> prompt_tokens;      // usage.prompt_tokens
  std::optional<int> completion_tokens;  // usage.completion_tokens
  std::optional<int> cached_tokens;      // usage.prompt_tokens_details.cached_tokens
};

// Parses one event's data. InvalidArgument for malformed JSON; Internal carrying the server's
// message when the chunk is an {"error": {...}} object.
absl::StatusOr<CompletionChunk> ParseCompletionChunk(std::string_view data);

// The served model and its context from a GET /v1/models body: the first entry's "id", and its
// "max_model_len" when the server adds it (vLLM and Baton do). InvalidArgument when malformed.
absl::StatusOr<ModelInfo> ParseModelList(std::string_view body);

}  // namespace baton::bench
