#include "scheduler/global/chat_prompt.h"

#include "absl/strings/str_cat.h"

namespace baton::scheduler {

absl::Status ValidateChatPrompt(const ChatPrompt& chat) {
  const nlohmann::ordered_json& messages = chat.messages;
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError("'messages' must be a non-empty array of message objects");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::ordered_json& message = messages[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'messages'[", i, "] must be an object with a string 'role'"));
    }
    if (message.contains("content") && !message["content"].is_string() &&
        !message["content"].is_array() && !message["content"].is_null()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'messages'[", i, "].content must be a string, an array of parts or null"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RenderChatPrompt(const absl::StatusOr<runtime::ChatTemplate>& chat_template,
                                             const ChatPrompt& chat) {
  if (!chat_template.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(chat_template.status().message(), ": send a plain prompt instead"));
  }
  absl::StatusOr<std::string> prompt = chat_template->Render(chat.messages, chat.options);
  if (!prompt.ok()) {
    return absl::Status(prompt.status().code(),
                        absl::StrCat("chat template: ", prompt.status().message()));
  }
  return prompt;
}

}  // namespace baton::scheduler
