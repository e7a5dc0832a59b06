// Renders the chat template of a Hugging Face checkpoint: messages (and tools) to the prompt text,
// the way transformers' apply_chat_template(tokenize=False) does, through our Jinja2 subset
// (runtime/tokenizer/jinja/). The scheduler's core renders a chat request's messages with it
// (RequestDriver::Prepare, scheduler/global/chat_prompt.h) and tokenizes the result, whichever API
// the request came through.
//
// Lifecycle: load once per model (FromTokenizerConfigJson, or FromSource for --chat-template FILE),
// then Render per request; Render is const and thread-safe.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/jinja/template.h"

namespace baton::runtime {

struct ChatRenderOptions {
  // Append the assistant turn header so the model answers next.
  bool add_generation_prompt = false;
  // The OpenAI `tools` array (the template sees None when absent, as transformers passes it).
  std::optional<nlohmann::ordered_json> tools;
  // RAG documents for templates that take them (None when absent).
  std::optional<nlohmann::ordered_json> documents;
  // Extra template variables, e.g. {"enable_thinking": false} (vLLM's chat_template_kwargs). A JSON
  // object; its keys may not override messages/tools/documents/add_generation_prompt.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // Guards (output size, iterations, nesting) and the clock strftime_now reads.
  jinja::RenderOptions render;
};

class ChatTemplate {
 public:
  // Reads "chat_template" (a string, or a list of {"name", "template"} from which "default" is used,
  // and "tool_use" when tools are given) and bos_token / eos_token (strings or {"content": ...})
  // from the text of a tokenizer_config.json. InvalidArgument naming `source` when the file has no
  // chat template or the template does not parse.
  static absl::StatusOr<ChatTemplate> FromTokenizerConfigJson(
      std::string_view json_text, std::string_view source = "tokenizer_config.json");

  // A template given on its own (--chat-template FILE); the tokens are what the template sees as
  // bos_token / eos_token (Undefined when nullopt).
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view source,
                                                 std::optional<std::string> bos_token,
                                                 std::optional<std::string> eos_token);

  // `messages`: a JSON array of message objects, passed to the template as is (role, content as a
  // string or a list of parts, tool_calls, tool_call_id, name, reasoning_content...). Objects keep
  // their key order, which `tojson` shows. InvalidArgument for a template error (including the
  // template's own raise_exception, whose message is returned verbatim), ResourceExhausted when a
  // guard in options.render.limits trips.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages,
                                     const ChatRenderOptions& options) const;

  bool has_tool_use_template() const { return tool_use_.has_value(); }

  // Another template with this one's bos_token and eos_token (a request's own chat_template).
  absl::StatusOr<ChatTemplate> WithSource(std::string_view source) const {
    return FromSource(source, bos_token_, eos_token_);
  }

 private:
  ChatTemplate(jinja::Template default_template, std::optional<jinja::Template> tool_use,
               std::optional<std::string> bos_token, std::optional<std::string> eos_token)
      : default_(std::move(default_template)),
        tool_use_(std::move(tool_use)),
        bos_token_(std::move(bos_token)),
        eos_token_(std::move(eos_token)) {}

  jinja::Template default_;
  std::optional<jinja::Template> tool_use_;
  std::optional<std::string> bos_token_;
  std::optional<std::string> eos_token_;
};

}  // namespace baton::runtime
