// ChatPrompt: a conversation to be answered, as a request carries it before the model's chat
// template turns it into prompt text. Every front end (OpenAI chat JSON, the gRPC ChatPrompt, vLLM's
// /tokenize) fills one; RequestDriver::Prepare renders it with the served model's template, so that
// the same messages become the same tokens whichever way they came.
#pragma once

#include <optional>
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
  // vLLM's continue_final_message: the prompt ends inside the final message, whose text the model
  // continues, rather than after it (excludes add_generation_prompt).
  bool continue_final_message = false;
  // A request's own template (vLLM's `chat_template` field): rendered by the same Jinja engine in
  // the same sandbox and limits as the model's, with the model's bos/eos tokens. Absent: the model's.
  std::optional<std::string> template_source;
};

// Each message an object with a string role, its content a string, an array of text parts or null
// (an assistant turn that only calls tools); the rest is the template's business, as in
// transformers. InvalidArgument naming the message otherwise ("'messages'[2] must be an object
// ..."), for a part that is not text (the served models take text only), and for
// continue_final_message with add_generation_prompt.
absl::Status ValidateChatPrompt(const ChatPrompt& chat);

// The prompt text: `chat` through `chat_template` (not OK: the model has none, or it did not
// parse; InvalidArgument saying which). A template error is InvalidArgument "chat template: ..."
// (the template's own raise_exception message verbatim); a tripped guard is ResourceExhausted.
// With continue_final_message the text is cut after the final message's content (transformers'
// rule), InvalidArgument when the template does not show it.
absl::StatusOr<std::string> RenderChatPrompt(const absl::StatusOr<runtime::ChatTemplate>& chat_template,
                                             const ChatPrompt& chat);

}  // namespace baton::scheduler
