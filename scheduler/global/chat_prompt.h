// ChatPrompt: a conversation to be answered, as a request carries it before the model's chat
// template turns it into prompt text. Every front end (OpenAI chat JSON, the gRPC ChatPrompt, vLLM's
// /tokenize) fills one; RequestDriver::Prepare renders it with the served model's template, so that
// the same messages become the same tokens whichever way they came.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/chat_template.h"

namespace baton::scheduler {

struct ChatPrompt {
  // A JSON array of message objects, as OpenAI's `messages` (role, content as a string, a list of
  // parts or null, tool_calls, tool_call_id, name, ...); key order is kept, which `tojson` shows.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // add_generation_prompt (true for a chat request), tools, chat_template_kwargs.
  runtime::ChatRenderOptions options;
};

// Each message an object with a string role, its content a string, an array of parts or null (an
// assistant turn that only calls tools); the rest is the template's business, as in transformers.
// InvalidArgument naming the message otherwise ("'messages'[2] must be an object ...").
absl::Status ValidateChatPrompt(const ChatPrompt& chat);

// The prompt text: `chat` through `chat_template` (not OK: the model has none, or it did not
// parse; InvalidArgument saying which). A template error is InvalidArgument "chat template: ..."
// (the template's own raise_exception message verbatim); a tripped guard is ResourceExhausted.
absl::StatusOr<std::string> RenderChatPrompt(const absl::StatusOr<runtime::ChatTemplate>& chat_template,
                                             const ChatPrompt& chat);

}  // namespace baton::scheduler
