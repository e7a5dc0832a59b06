#include "scheduler/global/chat_prompt.h"

#include <optional>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/absl_compat.h"

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
    if (!message.contains("content") || !message["content"].is_array()) continue;
    const nlohmann::ordered_json& parts = message["content"];
    for (size_t j = 0; j < parts.size(); ++j) {
      const std::string where = absl::StrCat("'messages'[", i, "].content[", j, "]");
      if (!parts[j].is_object() || !parts[j].contains("type") || !parts[j]["type"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " must be an object with a string 'type'"));
      }
      const std::string type = parts[j]["type"].get<std::string>();
      if (type != "text") {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": type '", type, "' is not supported: the served model takes text parts only"));
      }
      if (!parts[j].contains("text") || !parts[j]["text"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " is a text part without a string 'text'"));
      }
    }
  }
  if (chat.continue_final_message && chat.options.add_generation_prompt) {
    return absl::InvalidArgumentError(
        "'continue_final_message' and 'add_generation_prompt' cannot both be true (set "
        "add_generation_prompt to false to continue the final message)");
  }
  return absl::OkStatus();
}

namespace {

// transformers' continue_final_message: the rendered text up to the end of the final message's
// content (its last text part's, stripped), wherever the template put it last.
absl::StatusOr<std::string> CutAfterFinalMessage(std::string rendered, const nlohmann::ordered_json& messages) {
  const nlohmann::ordered_json& content = messages.back().contains("content") ? messages.back()["content"]
                                                                             : nlohmann::ordered_json();
  std::string final_text;
  if (content.is_string()) final_text = content.get<std::string>();
  if (content.is_array() && !content.empty()) final_text = content.back().value("text", "");
  const std::string_view stripped = runtime::ToStd(absl::StripAsciiWhitespace(final_text));
  const size_t at = rendered.rfind(stripped);
  if (stripped.empty() || at == std::string::npos) {
    return absl::InvalidArgumentError(
        "'continue_final_message': the final message's content does not appear in the rendered chat");
  }
  rendered.resize(at + stripped.size());
  return rendered;
}

}  // namespace

absl::StatusOr<std::string> RenderChatPrompt(const absl::StatusOr<runtime::ChatTemplate>& chat_template,
                                             const ChatPrompt& chat) {
  std::optional<runtime::ChatTemplate> own;  // the request's template, if it brought one
  if (chat.template_source) {
    absl::StatusOr<runtime::ChatTemplate> parsed =
        chat_template.ok() ? chat_template->WithSource(*chat.template_source)
                           : runtime::ChatTemplate::FromSource(*chat.template_source, std::nullopt, std::nullopt);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("'chat_template': ", parsed.status().message()));
    }
    own = *std::move(parsed);
  } else if (!chat_template.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(chat_template.status().message(), ": send a plain prompt instead"));
  }
  const runtime::ChatTemplate& renderer = own ? *own : *chat_template;
  absl::StatusOr<std::string> prompt = renderer.Render(chat.messages, chat.options);
  if (!prompt.ok()) {
    return absl::Status(prompt.status().code(),
                        absl::StrCat("chat template: ", prompt.status().message()));
  }
  if (chat.continue_final_message) return CutAfterFinalMessage(*std::move(prompt), chat.messages);
  return prompt;
}

}  // namespace baton::scheduler
