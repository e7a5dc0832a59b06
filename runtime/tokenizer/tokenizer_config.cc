#include "runtime/tokenizer/tokenizer_config.h"

#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/json_fields.h"

namespace baton::runtime {
namespace {

absl::StatusOr<std::optional<std::string>> ReadTokenName(const nlohmann::json& config,
                                                         std::string_view key,
                                                         const JsonPath& at) {
  const nlohmann::json* value = FindField(config, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) {
    ASSIGN_OR_RETURN(std::string content, ReadString(*value, "content", at.Child(key)));
    return content;
  }
  return at.Child(key).Invalid("expected a string or an object with \"content\"");
}

absl::StatusOr<std::optional<bool>> ReadOptionalBool(const nlohmann::json& config,
                                                     std::string_view key, const JsonPath& at) {
  const nlohmann::json* value = FindField(config, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) return at.Child(key).Invalid("expected true or false");
  return value->get<bool>();
}

}  // namespace

absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view json_text,
                                                     std::string_view source) {
  ASSIGN_OR_RETURN(const nlohmann::json config, ParseJson(json_text, source));
  const JsonPath at{std::string(source)};
  if (!config.is_object()) return at.Invalid("expected a JSON object");
  TokenizerConfig result;
  ASSIGN_OR_RETURN(result.bos_token, ReadTokenName(config, "bos_token", at));
  ASSIGN_OR_RETURN(result.eos_token, ReadTokenName(config, "eos_token", at));
  ASSIGN_OR_RETURN(result.add_bos_token, ReadOptionalBool(config, "add_bos_token", at));
  ASSIGN_OR_RETURN(result.add_eos_token, ReadOptionalBool(config, "add_eos_token", at));
  return result;
}

}  // namespace baton::runtime
