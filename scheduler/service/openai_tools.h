// The tool-calling fields of an OpenAI chat request, read as vLLM reads them: `tools` (function
// definitions, which also reach the chat template) and `tool_choice`:
//   "none"      the reply is text.
//   "auto"      the model decides; the server's --tool-call-parser reads calls out of its text
//               (needs --enable-auto-tool-choice, as in vLLM). The default when tools are given and
//               auto tool choice is on; otherwise "none" is.
//   "required"  the grammar forces a JSON list of one or more calls to the given tools (exactly one
//               with parallel_tool_calls false).
//   {"type": "function", "function": {"name": N}}: the grammar forces N's arguments.
// And the server's --reasoning-parser, which splits a thinking model's reasoning off its content.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "scheduler/global/generate_request.h"
#include "scheduler/service/chat_reply/reasoning_formats.h"
#include "scheduler/service/chat_reply/tool_call_formats.h"

namespace baton::scheduler {

// The chat server's settings (vLLM's flags of the same names); checked once at start-up.
struct ChatReplyOptions {
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // a ToolCallFormatNames() entry; empty: none
  std::string reasoning_parser;  // a ReasoningFormatNames() entry; empty: none
};

// InvalidArgument for an unknown parser, or auto tool choice without one.
absl::Status ValidateChatReplyOptions(const ChatReplyOptions& options);

// How a chat request's reply is read back into the message.
struct ChatReplyPlan {
  std::optional<ReasoningFormat> reasoning;
  std::optional<ToolCallFormat> tool_calls;
  // auto and required: a reply with calls finishes with "tool_calls" (a named choice with "stop",
  // as OpenAI's).
  bool finish_with_tool_calls = false;
};

// Reads tools and tool_choice from a chat body: a required or named choice becomes the request's
// output constraint, an auto one keeps the special tokens in the text (the formats' markers are
// often special tokens). InvalidArgument naming the field for a malformed tool, a choice without
// tools or naming none of them, auto without a parser, or a forced choice beside a response_format.
absl::StatusOr<ChatReplyPlan> ReadToolChoice(const nlohmann::json& body, const ChatReplyOptions& options,
                                             GenerateRequest* request);

}  // namespace baton::scheduler
