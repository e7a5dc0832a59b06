// Typed access to tokenizer.json fields with errors that name the file and the field, e.g.
// InvalidArgument("/m/tokenizer.json: field 'model.merges[3]': expected a string or a pair").
// Only the tokenizer's loaders use this; no JSON type crosses the tokenizer's public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {

// Where a JSON value sits: the file (for messages) and the dotted path to the value.
class JsonPath {
 public:
  explicit JsonPath(std::string source) : source_(std::move(source)) {}

  JsonPath Child(std::string_view key) const;
  JsonPath Index(size_t index) const;

  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }

  // "<source>: field '<path>': <what>" ("<source>: <what>" at the root) with code
  // kInvalidArgument or kUnimplemented.
  absl::Status Invalid(std::string_view what) const;
  absl::Status Unsupported(std::string_view what) const;

 private:
  std::string source_;
  std::string path_;
};

// The member `key` of `object`, or nullptr when `object` is not an object, lacks it, or it is null.
const nlohmann::json* FindField(const nlohmann::json& object, std::string_view key);

// Required string member.
absl::StatusOr<std::string> ReadString(const nlohmann::json& object, std::string_view key,
                                       const JsonPath& at);
// Optional members: `default_value` when absent or null, an error when of the wrong type.
absl::StatusOr<std::string> ReadString(const nlohmann::json& object, std::string_view key,
                                       std::string_view default_value, const JsonPath& at);
absl::StatusOr<bool> ReadBool(const nlohmann::json& object, std::string_view key,
                              bool default_value, const JsonPath& at);
absl::StatusOr<int64_t> ReadInt(const nlohmann::json& object, std::string_view key,
                                int64_t default_value, const JsonPath& at);

// A token id: an integer in [0, 2^31).
absl::StatusOr<int32_t> ToTokenId(const nlohmann::json& value, const JsonPath& at);

// Parses `text` as JSON; InvalidArgument naming `source` and the parse error on failure.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view source);

}  // namespace baton::runtime
