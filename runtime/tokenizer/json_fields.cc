#include "runtime/tokenizer/json_fields.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/absl_compat.h"

namespace baton::runtime {

JsonPath JsonPath::Child(std::string_view key) const {
  JsonPath child = *this;
  child.path_ = path_.empty() ? std::string(key) : absl::StrCat(path_, ".", ToAbsl(key));
  return child;
}

JsonPath JsonPath::Index(size_t index) const {
  JsonPath child = *this;
  child.path_ = absl::StrCat(path_, "[", index, "]");
  return child;
}

absl::Status JsonPath::Invalid(std::string_view what) const {
  if (path_.empty()) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", ToAbsl(what)));
  return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", path_, "': ", ToAbsl(what)));
}

absl::Status JsonPath::Unsupported(std::string_view what) const {
  if (path_.empty()) return absl::UnimplementedError(absl::StrCat(source_, ": ", ToAbsl(what)));
  return absl::UnimplementedError(absl::StrCat(source_, ": field '", path_, "': ", ToAbsl(what)));
}

const nlohmann::json* FindField(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::string> ReadString(const nlohmann::json& object, std::string_view key,
                                       const JsonPath& at) {
  const nlohmann::json* value = FindField(object, key);
  if (value == nullptr) return at.Child(key).Invalid("missing (expected a string)");
  if (!value->is_string()) return at.Child(key).Invalid("expected a string");
  return value->get<std::string>();
}

absl::StatusOr<std::string> ReadString(const nlohmann::json& object, std::string_view key,
                                       std::string_view default_value, const JsonPath& at) {
  const nlohmann::json* value = FindField(object, key);
  if (value == nullptr) return std::string(default_value);
  if (!value->is_string()) return at.Child(key).Invalid("expected a string");
  return value->get<std::string>();
}

absl::StatusOr<bool> ReadBool(const nlohmann::json& object, std::string_view key,
                              bool default_value, const JsonPath& at) {
  const nlohmann::json* value = FindField(object, key);
  if (value == nullptr) return default_value;
  if (!value->is_boolean()) return at.Child(key).Invalid("expected true or false");
  return value->get<bool>();
}

absl::StatusOr<int64_t> ReadInt(const nlohmann::json& object, std::string_view key,
                                int64_t default_value, const JsonPath& at) {
  const nlohmann::json* value = FindField(object, key);
  if (value == nullptr) return default_value;
  if (!value->is_number_integer()) return at.Child(key).Invalid("expected an integer");
  return value->get<int64_t>();
}

absl::StatusOr<int32_t> ToTokenId(const nlohmann::json& value, const JsonPath& at) {
  if (!value.is_number_integer()) return at.Invalid("expected an integer token id");
  const int64_t id = value.get<int64_t>();
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
    return at.Invalid(absl::StrCat("token id ", id, " is out of range"));
  }
  return static_cast<int32_t>(id);
}

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view source) {
  // nlohmann reports the error position only through its exception, caught right here.
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(source), ": malformed JSON: ", e.what()));
  }
}

}  // namespace baton::runtime
