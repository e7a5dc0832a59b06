#include "runtime/tokenizer/chat_template.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/jinja/json_value.h"
#include "runtime/tokenizer/tokenizer_config.h"

namespace baton::runtime {
namespace {

absl::StatusOr<jinja::Template> ParseNamed(std::string_view text, std::string_view source,
                                           std::string_view name) {
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(text);
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(ToAbsl(source), ": chat_template '",
                                                        ToAbsl(name), "': ", t.status().message()));
  }
  return t;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfigJson(std::string_view json_text,
                                                                   std::string_view source) {
  ASSIGN_OR_RETURN(TokenizerConfig config, ParseTokenizerConfig(json_text, source));
  nlohmann::json parsed = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* field =
      parsed.is_object() && parsed.contains("chat_template") ? &parsed["chat_template"] : nullptr;
  if (field == nullptr || field->is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(source), ": no chat_template"));
  }
  std::optional<std::string> default_text, tool_use_text;
  if (field->is_string()) {
    default_text = field->get<std::string>();
  } else if (field->is_array()) {
    for (const auto& entry : *field) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            ToAbsl(source), ": chat_template entries must be {\"name\": str, \"template\": str}"));
      }
      std::string name = entry["name"].get<std::string>();
      if (name == "default") default_text = entry["template"].get<std::string>();
      if (name == "tool_use") tool_use_text = entry["template"].get<std::string>();
    }
    if (!default_text) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(source), ": chat_template has no template named 'default'"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(source), ": chat_template must be a string or a list of templates"));
  }
  ASSIGN_OR_RETURN(jinja::Template default_template, ParseNamed(*default_text, source, "default"));
  std::optional<jinja::Template> tool_use;
  if (tool_use_text) {
    ASSIGN_OR_RETURN(tool_use, ParseNamed(*tool_use_text, source, "tool_use"));
  }
  return ChatTemplate(std::move(default_template), std::move(tool_use), config.bos_token,
                      config.eos_token);
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view source,
                                                      std::optional<std::string> bos_token,
                                                      std::optional<std::string> eos_token) {
  ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(source));
  return ChatTemplate(std::move(t), std::nullopt, std::move(bos_token), std::move(eos_token));
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 const ChatRenderOptions& options) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a JSON array");
  if (!options.template_kwargs.is_object()) {
    return absl::InvalidArgumentError("chat template kwargs must be a JSON object");
  }
  // The variables transformers passes: the special tokens, the caller's kwargs, then the fixed
  // arguments (which win over kwargs of the same name).
  std::vector<std::pair<std::string, jinja::Value>> vars;
  if (bos_token_) vars.emplace_back("bos_token", jinja::Value::String(*bos_token_));
  if (eos_token_) vars.emplace_back("eos_token", jinja::Value::String(*eos_token_));
  for (auto it = options.template_kwargs.begin(); it != options.template_kwargs.end(); ++it) {
    ASSIGN_OR_RETURN(jinja::Value v, jinja::FromJson(it.value()));
    vars.emplace_back(it.key(), std::move(v));
  }
  ASSIGN_OR_RETURN(jinja::Value messages_value, jinja::FromJson(messages));
  vars.emplace_back("messages", std::move(messages_value));
  jinja::Value tools = jinja::Value::None();
  if (options.tools) {
    ASSIGN_OR_RETURN(tools, jinja::FromJson(*options.tools));
  }
  vars.emplace_back("tools", tools);
  jinja::Value documents = jinja::Value::None();
  if (options.documents) {
    ASSIGN_OR_RETURN(documents, jinja::FromJson(*options.documents));
  }
  vars.emplace_back("documents", std::move(documents));
  vars.emplace_back("add_generation_prompt", jinja::Value::Bool(options.add_generation_prompt));
  const jinja::Template& chosen = (options.tools && tool_use_) ? *tool_use_ : default_;
  return chosen.Render(vars, options.render);
}

}  // namespace baton::runtime
