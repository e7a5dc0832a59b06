// OpenAI /v1/chat/completions JSON <-> the scheduler's native types. The messages (and tools)
// become the prompt through the model's chat template (runtime/tokenizer/chat_template.h), rendered
// as transformers' apply_chat_template renders it and tokenized without adding special tokens (the
// template writes them); every other field is read as /v1/completions reads it (ReadSamplingFields),
// except that max_tokens defaults to the rest of the context, as in vLLM. The answer is an assistant
// message (chat.completion) or its deltas (chat.completion.chunk).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/chat_template.h"
#include "scheduler/global/generate_request.h"
#include "scheduler/service/openai_completion.h"

namespace baton::scheduler {

// `body` and `ordered_body` are the same request parsed twice: the template sees the messages and
// tools in the client's key order (tojson prints them), everything else reads the plain form.
// `chat_template` not OK: the model has none, or it did not parse (InvalidArgument saying which,
// after the request's own fields are checked). InvalidArgument for a bad
// field, a field this endpoint does not support yet, or a template that fails (the template's own
// raise_exception message included); ResourceExhausted when the rendering trips a guard.
absl::StatusOr<GenerateRequest> ChatToRequest(const nlohmann::json& body,
                                              const nlohmann::ordered_json& ordered_body,
                                              const absl::StatusOr<runtime::ChatTemplate>& chat_template,
                                              CompletionStreaming* streaming);

}  // namespace baton::scheduler
