#include "scheduler/service/openai_chat.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "scheduler/service/json_fields.h"
#include "scheduler/service/openai_structured_outputs.h"

namespace baton::scheduler {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// An assistant's earlier tool calls carry their arguments as JSON text; chat templates print them
// with tojson, so they get the object (as vLLM hands them over). Text that is not JSON stays text.
void ParseToolCallArguments(ordered_json& messages) {
  for (ordered_json& message : messages) {
    if (!message.contains("tool_calls") || !message["tool_calls"].is_array()) continue;
    for (ordered_json& call : message["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      ordered_json& function = call["function"];
      if (!function.contains("arguments") || !function["arguments"].is_string()) continue;
      ordered_json parsed = ordered_json::parse(function["arguments"].get<std::string>(), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object()) continue;
      if (!CheckSchemaDepth(json(parsed), "arguments").ok()) continue;  // the template walks it
      function["arguments"] = std::move(parsed);
    }
  }
}

}  // namespace

absl::StatusOr<ChatPrompt> ChatPromptFromJson(const json& body, const ordered_json& ordered_body) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  if (!body.contains("messages")) return absl::InvalidArgumentError("'messages' is required");
  ChatPrompt chat;
  chat.messages = ordered_body["messages"];
  chat.options.add_generation_prompt = true;
  RETURN_IF_ERROR(ReadBool(body, "add_generation_prompt", &chat.options.add_generation_prompt));
  RETURN_IF_ERROR(ReadBool(body, "continue_final_message", &chat.continue_final_message));
  if (body.contains("chat_template") && !body["chat_template"].is_null()) {
    if (!body["chat_template"].is_string()) return absl::InvalidArgumentError("'chat_template' must be a string");
    chat.template_source = body["chat_template"].get<std::string>();
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return absl::InvalidArgumentError("'tools' must be an array");
    chat.options.tools = ordered_body["tools"];
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return absl::InvalidArgumentError("'chat_template_kwargs' must be an object");
    }
    chat.options.template_kwargs = ordered_body["chat_template_kwargs"];
  }
  RETURN_IF_ERROR(ValidateChatPrompt(chat));
  ParseToolCallArguments(chat.messages);
  return chat;
}

absl::StatusOr<GenerateRequest> ChatToRequest(const json& body, const ordered_json& ordered_body,
                                              const ChatReplyOptions& reply_options, AnswerShape* shape,
                                              ChatReplyPlan* reply) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  GenerateRequest request;
  if (body.contains("model") && body["model"].is_string()) request.model = body["model"];
  ASSIGN_OR_RETURN(request.chat, ChatPromptFromJson(body, ordered_body));
  // Chat logprobs: a switch, and how many alternatives each token lists (vLLM's rules).
  bool logprobs = false;
  RETURN_IF_ERROR(ReadBool(body, "logprobs", &logprobs));
  int top_logprobs = 0;
  RETURN_IF_ERROR(ReadNumber(body, "top_logprobs", &top_logprobs));
  if (top_logprobs != 0 && !logprobs) {
    return absl::InvalidArgumentError("'top_logprobs' needs 'logprobs': true");
  }
  if (top_logprobs < 0 || top_logprobs > 20) {
    return absl::InvalidArgumentError(absl::StrCat("'top_logprobs' must be in [0, 20], got ", top_logprobs));
  }
  if (logprobs) request.params.num_logprobs = top_logprobs;
  RETURN_IF_ERROR(ReadSamplingFields(body, /*default_max_tokens=*/std::nullopt, &request, shape));
  // After the sampling fields: a forced tool choice is a constraint that may not meet another.
  ASSIGN_OR_RETURN(*reply, ReadToolChoice(body, reply_options, &request));
  // The template writes the special tokens; vLLM's chat adds none of its own by default.
  if (body.contains("add_special_tokens") && body["add_special_tokens"] == true) {
    return absl::InvalidArgumentError("'add_special_tokens' is not supported yet on chat (only false)");
  }
  // best_of and echo are /v1/completions' alone here.
  int best_of = shape->n;
  RETURN_IF_ERROR(ReadNumber(body, "best_of", &best_of));
  if (best_of != shape->n) return absl::InvalidArgumentError("'best_of' is not supported on chat completions");
  if (body.contains("echo") && body["echo"] == true) {
    return absl::InvalidArgumentError("'echo' is not supported on chat completions yet (only false)");
  }
  return request;
}

}  // namespace baton::scheduler
