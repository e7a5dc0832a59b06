#include "scheduler/service/openai_chat.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "scheduler/service/json_fields.h"

namespace baton::scheduler {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// Each message an object with a string role; its content a string, an array of parts or null
// (an assistant turn that only calls tools). The rest is the template's business, as in transformers.
absl::Status CheckMessages(const json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError("'messages' must be a non-empty array of message objects");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("'messages'[", i, "] must be an object with a string 'role'"));
    }
    if (message.contains("content") && !message["content"].is_string() && !message["content"].is_array() &&
        !message["content"].is_null()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'messages'[", i, "].content must be a string, an array of parts or null"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerateRequest> ChatToRequest(const json& body, const ordered_json& ordered_body,
                                              const absl::StatusOr<runtime::ChatTemplate>& chat_template,
                                              CompletionStreaming* streaming) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  GenerateRequest request;
  if (body.contains("model") && body["model"].is_string()) request.model = body["model"];
  if (!body.contains("messages")) return absl::InvalidArgumentError("'messages' is required");
  RETURN_IF_ERROR(CheckMessages(body["messages"]));
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
  runtime::ChatRenderOptions options;
  options.add_generation_prompt = true;
  RETURN_IF_ERROR(ReadBool(body, "add_generation_prompt", &options.add_generation_prompt));
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return absl::InvalidArgumentError("'tools' must be an array");
    options.tools = ordered_body["tools"];
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return absl::InvalidArgumentError("'chat_template_kwargs' must be an object");
    }
    options.template_kwargs = ordered_body["chat_template_kwargs"];
  }
  RETURN_IF_ERROR(ReadSamplingFields(body, /*default_max_tokens=*/std::nullopt, &request, streaming));
  if (!chat_template.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(chat_template.status().message(),
                                                   ": use /v1/completions"));
  }
  absl::StatusOr<std::string> prompt = chat_template->Render(ordered_body["messages"], options);
  if (!prompt.ok()) {
    return absl::Status(prompt.status().code(), absl::StrCat("chat template: ", prompt.status().message()));
  }
  request.prompt_text = *std::move(prompt);
  request.add_special_tokens = false;
  return request;
}

}  // namespace baton::scheduler
