// OpenAI /v1/chat/completions JSON -> the scheduler's native request. The messages (and tools)
// become a ChatPrompt, which RequestDriver::Prepare renders through the model's chat template
// (scheduler/global/chat_prompt.h) as transformers' apply_chat_template renders it, tokenized
// without adding special tokens (the template writes them); every other field is read as
// /v1/completions reads it (ReadSamplingFields), except that max_tokens defaults to the rest of the
// context, as in vLLM. The answer's shape is openai_answer.h's.
#pragma once

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "scheduler/global/chat_prompt.h"
#include "scheduler/global/generate_request.h"
#include "scheduler/service/openai_completion.h"
#include "scheduler/service/openai_tools.h"

namespace baton::scheduler {

// `body` and `ordered_body` are the same request parsed twice: the template sees the messages and
// tools in the client's key order (tojson prints them), everything else reads the plain form.
// *reply: how the reply's text becomes the message (tools and tool_choice, openai_tools.h; the
// server's reasoning parser). InvalidArgument for a bad field or a field this endpoint does not
// support yet.
absl::StatusOr<GenerateRequest> ChatToRequest(const nlohmann::json& body,
                                              const nlohmann::ordered_json& ordered_body,
                                              const ChatReplyOptions& reply_options, AnswerShape* shape,
                                              ChatReplyPlan* reply);

// The conversation of a chat body (also vLLM's /tokenize with `messages`): messages, tools,
// chat_template_kwargs, add_generation_prompt (default true). InvalidArgument for a bad field.
absl::StatusOr<ChatPrompt> ChatPromptFromJson(const nlohmann::json& body,
                                              const nlohmann::ordered_json& ordered_body);

}  // namespace baton::scheduler
