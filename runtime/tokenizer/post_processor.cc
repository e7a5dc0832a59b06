#include "runtime/tokenizer/post_processor.h"

#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

// ["<s>", 1] as RobertaProcessing and BertProcessing spell cls and sep.
absl::StatusOr<int32_t> ReadTokenPairId(const nlohmann::json& json, std::string_view key,
                                        const JsonPath& at) {
  const nlohmann::json* pair = FindField(json, key);
  if (pair == nullptr || !pair->is_array() || pair->size() != 2) {
    return at.Child(key).Invalid("expected a [token, id] pair");
  }
  return ToTokenId((*pair)[1], at.Child(key).Index(1));
}

// The ids of one {"SpecialToken": {"id": name}} item of a template.
absl::StatusOr<std::vector<int32_t>> SpecialTokenIds(const nlohmann::json& item,
                                                     const nlohmann::json& special_tokens,
                                                     const JsonPath& at) {
  ASSIGN_OR_RETURN(const std::string name, ReadString(item, "id", at));
  const nlohmann::json* entry = FindField(special_tokens, name);
  if (entry == nullptr) return at.Child("id").Invalid("\"" + name + "\" is not in special_tokens");
  const nlohmann::json* ids = FindField(*entry, "ids");
  if (ids == nullptr || !ids->is_array()) {
    return at.Child("id").Invalid("special_tokens[\"" + name + "\"].ids is not an array");
  }
  std::vector<int32_t> result;
  for (size_t i = 0; i < ids->size(); ++i) {
    ASSIGN_OR_RETURN(const int32_t id, ToTokenId((*ids)[i], at.Child("ids").Index(i)));
    result.push_back(id);
  }
  return result;
}

}  // namespace

absl::StatusOr<PostProcessor> PostProcessor::FromJson(const nlohmann::json& json,
                                                      const JsonPath& at) {
  PostProcessor processor;
  if (!json.is_null()) RETURN_IF_ERROR(processor.Wrap(json, at));
  return processor;
}

absl::Status PostProcessor::Wrap(const nlohmann::json& json, const JsonPath& at) {
  ASSIGN_OR_RETURN(const std::string type, ReadString(json, "type", at));
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
  if (type == "Sequence") {
    const nlohmann::json* children = FindField(json, "processors");
    if (children == nullptr || !children->is_array()) {
      return at.Child("processors").Invalid("expected an array");
    }
    for (size_t i = 0; i < children->size(); ++i) {
      RETURN_IF_ERROR(Wrap((*children)[i], at.Child("processors").Index(i)));
    }
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    return absl::OkStatus();
  } else if (type == "TemplateProcessing") {
    const nlohmann::json* single = FindField(json, "single");
    if (single == nullptr || !single->is_array()) {
      return at.Child("single").Invalid("expected an array");
    }
    const nlohmann::json* special_tokens = FindField(json, "special_tokens");
    const nlohmann::json empty = nlohmann::json::object();
    bool seen_sequence = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const JsonPath item_at = at.Child("single").Index(i);
      const nlohmann::json& item = (*single)[i];
      if (const nlohmann::json* sequence = FindField(item, "Sequence")) {
        ASSIGN_OR_RETURN(const std::string name, ReadString(*sequence, "id", item_at.Child("Sequence")));
        if (name != "A" || seen_sequence) {
          return item_at.Invalid("a single-sequence template must hold $A exactly once");
        }
        seen_sequence = true;
      } else if (const nlohmann::json* special = FindField(item, "SpecialToken")) {
        ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                         SpecialTokenIds(*special, special_tokens ? *special_tokens : empty,
                                         item_at.Child("SpecialToken")));
        std::vector<int32_t>& side = seen_sequence ? suffix : prefix;
        side.insert(side.end(), ids.begin(), ids.end());
      } else {
        return item_at.Invalid("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    if (!seen_sequence) return at.Child("single").Invalid("the template has no $A");
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    ASSIGN_OR_RETURN(const int32_t cls, ReadTokenPairId(json, "cls", at));
    ASSIGN_OR_RETURN(const int32_t sep, ReadTokenPairId(json, "sep", at));
    prefix.push_back(cls);
    suffix.push_back(sep);
  } else {
    return at.Child("type").Unsupported("post-processor type \"" + type + "\" is not supported");
  }
  prefix_ids_.insert(prefix_ids_.begin(), prefix.begin(), prefix.end());
  suffix_ids_.insert(suffix_ids_.end(), suffix.begin(), suffix.end());
  return absl::OkStatus();
}

}  // namespace baton::runtime
