// vLLM's POST /tokenize and POST /detokenize, so that users (and tests) see exactly the tokens the
// model receives: a prompt as /v1/completions tokenizes it, or messages as /v1/chat/completions
// renders them through the chat template; and token ids back to text.
//
//   /tokenize   {"prompt": str, "add_special_tokens": true} or {"messages": [...],
//               "add_generation_prompt": true, "add_special_tokens": false, "tools",
//               "chat_template_kwargs"}, either with "return_token_strs"
//               -> {"count", "max_model_len", "tokens", "token_strs"}
//   /detokenize {"tokens": [ids]} -> {"prompt": str}
#pragma once

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "scheduler/global/served_model.h"

namespace baton::scheduler {

// InvalidArgument for a bad body (neither or both of prompt and messages, wrong types, a template
// error), NotFound for a `model` that is not the served one.
absl::StatusOr<nlohmann::json> Tokenize(const nlohmann::json& body, const nlohmann::ordered_json& ordered_body,
                                        const ServedModel& model);

// InvalidArgument for a body without a token id array or an id outside the vocabulary.
absl::StatusOr<nlohmann::json> Detokenize(const nlohmann::json& body, const ServedModel& model);

}  // namespace baton::scheduler
