#include "scheduler/service/openai_chat.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "scheduler/service/json_fields.h"

namespace baton::scheduler {

using nlohmann::json;
using nlohmann::ordered_json;

absl::StatusOr<ChatPrompt> ChatPromptFromJson(const json& body, const ordered_json& ordered_body) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  if (!body.contains("messages")) return absl::InvalidArgumentError("'messages' is required");
  ChatPrompt chat;
  chat.messages = ordered_body["messages"];
  RETURN_IF_ERROR(ValidateChatPrompt(chat));
  chat.options.add_generation_prompt = true;
  RETURN_IF_ERROR(ReadBool(body, "add_generation_prompt", &chat.options.add_generation_prompt));
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
  return chat;
}

absl::StatusOr<GenerateRequest> ChatToRequest(const json& body, const ordered_json& ordered_body,
                                              AnswerShape* shape) {
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
  // The reply is text: no tool-call parser turns it into tool_calls, so a choice that needs one is
  // refused (as vLLM does without --tool-call-parser).
  if (body.contains("tool_choice") && !body["tool_choice"].is_null() && body["tool_choice"] != "none") {
    return absl::InvalidArgumentError(absl::StrCat(
        "'tool_choice' ", body["tool_choice"].dump(),
        " is not supported: this server has no tool-call parser (\"none\" is; tools still reach the "
        "chat template and the model's reply comes back as text)"));
  }
  // The template writes the special tokens; vLLM's chat adds none of its own by default.
  if (body.contains("add_special_tokens") && body["add_special_tokens"] == true) {
    return absl::InvalidArgumentError("'add_special_tokens' is not supported yet on chat (only false)");
  }
  // best_of and echo are /v1/completions' alone.
  int best_of = shape->n;
  RETURN_IF_ERROR(ReadNumber(body, "best_of", &best_of));
  if (best_of != shape->n) return absl::InvalidArgumentError("'best_of' is not supported on chat completions");
  return request;
}

}  // namespace baton::scheduler
