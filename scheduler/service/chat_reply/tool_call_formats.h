// How a model writes tool calls in its reply, read back: each format is a pure function of the
// reply's text so far (and whether it is finished) to its content and its calls, as far as they can
// be told. Text that may still turn out to be part of a call (a marker's first characters, a call
// whose name has not arrived) is held back until it is decided, so that what a format returns only
// ever grows as the reply does; ChatReplyParser streams the differences.
//
// The formats of vLLM's --tool-call-parser of the same names:
//   hermes       Hermes and Qwen2/2.5/3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
//                any number of them, content around them.
//   llama3_json  Llama 3.1/3.2: a reply that starts with {"name": ..., "parameters": {...}} (or
//                <|python_tag|> then that), several calls separated by ';'; else all content.
//   mistral      Mistral: content, then [TOOL_CALLS] and a JSON list of {"name", "arguments"}
//                objects, or (tokenizers v11+) [TOOL_CALLS]name[ARGS]{...} per call.
// And the two that a request's tool_choice forces through the grammar (openai_tools.h):
//   required     a JSON list of {"name": ..., "parameters": {...}} objects, at least one.
//   named        the reply is the arguments of the one named function.
//
// A call whose text is not a call after all (no name, broken JSON before the name) is content; a
// call that broke after its name went out stays a call, with the arguments it had.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::scheduler {

struct ParsedCall {
  std::string name;
  std::string arguments;  // JSON text, as far as it has arrived
};

struct ParsedReply {
  std::string reasoning;  // ReasoningFormat's; tool-call formats leave it empty
  std::string content;
  std::vector<ParsedCall> calls;
};

struct ToolCallFormat {
  std::string name;
  std::function<ParsedReply(std::string_view text, bool finished)> parse;
  // Mistral's chat template takes only 9-character alphanumeric call ids.
  int call_id_length = 24;
};

// The --tool-call-parser formats by name; InvalidArgument naming the known ones otherwise.
absl::StatusOr<ToolCallFormat> FindToolCallFormat(std::string_view name);
const std::vector<std::string>& ToolCallFormatNames();

// tool_choice "required": the reply the grammar forces, a JSON list of calls.
ToolCallFormat RequiredCallsFormat();
// tool_choice naming `function`: the reply is its arguments.
ToolCallFormat NamedCallFormat(std::string function);

}  // namespace baton::scheduler
