// ChatReplyParser: an assistant's reply text, as it streams, read into the fields of an OpenAI chat
// message: reasoning_content (a ReasoningFormat), content, and tool_calls (a ToolCallFormat), each
// streamed as OpenAI streams them: a call's id and name first (with no arguments, unless the reply
// ends there), then its arguments in pieces.
//
// Every Feed rescans the whole reply through the formats (pure functions, reasoning_formats.h and
// tool_call_formats.h) and returns what is new since the last; a streamed reply and the same reply
// read at once (Feed everything, then Finish) therefore come to the same message. One per reply,
// used on one thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/service/chat_reply/reasoning_formats.h"
#include "scheduler/service/chat_reply/tool_call_formats.h"

namespace baton::scheduler {

struct ToolCallDelta {
  int index = 0;     // the call's place in the message's tool_calls
  bool first = false;  // the call's first delta, which carries its id and name
  std::string id;
  std::string name;
  std::string arguments;  // the next piece of its JSON arguments
};

struct ChatReplyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
};

class ChatReplyParser {
 public:
  // Either format may be absent: no reasoning, or no tool calls.
  ChatReplyParser(std::optional<ReasoningFormat> reasoning, std::optional<ToolCallFormat> tool_calls);

  // The next text of the reply: what can be told of it now.
  ChatReplyDelta Feed(std::string_view text);
  // The reply ended: what was held back.
  ChatReplyDelta Finish();

  int num_calls() const { return static_cast<int>(emitted_arguments_.size()); }

 private:
  ChatReplyDelta Next(bool finished);

  const std::optional<ReasoningFormat> reasoning_;
  const std::optional<ToolCallFormat> tool_calls_;
  std::string text_;
  size_t emitted_reasoning_ = 0;
  size_t emitted_content_ = 0;
  std::vector<size_t> emitted_arguments_;  // per call announced
};

// A fresh tool-call id: "call_" and 24 random letters and digits, or (Mistral's templates) exactly
// `length` of them when length != 24.
std::string NewToolCallId(int length);

}  // namespace baton::scheduler
