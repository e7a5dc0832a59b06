#include "scheduler/service/openai_structured_outputs.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::scheduler {

using nlohmann::json;
using Kind = runtime::OutputConstraint::Kind;

namespace {

bool Present(const json& object, const char* field) {
  return object.contains(field) && !object[field].is_null();
}

}  // namespace

absl::Status CheckSchemaDepth(const json& value, const std::string& field) {
  std::vector<std::pair<const json*, int>> stack = {{&value, 1}};
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    if (depth > kMaxSchemaDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", field, "' nests deeper than ", kMaxSchemaDepth, " levels"));
    }
    for (const json& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return absl::OkStatus();
}

namespace {

// A JSON schema as clients send it: an object, or (vLLM's guided_json allows it) its JSON text.
absl::StatusOr<std::string> SchemaText(const json& value, const std::string& field) {
  if (value.is_boolean()) return value.dump();
  if (value.is_object()) {
    RETURN_IF_ERROR(CheckSchemaDepth(value, field));
    return value.dump();
  }
  if (value.is_string()) {
    const json parsed = json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      return absl::InvalidArgumentError(absl::StrCat("'", field, "': not a JSON schema (a JSON object)"));
    }
    RETURN_IF_ERROR(CheckSchemaDepth(parsed, field));
    return parsed.dump();
  }
  return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be a JSON schema object"));
}

absl::StatusOr<std::string> Text(const json& value, const std::string& field) {
  if (!value.is_string()) return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be a string"));
  return value.get<std::string>();
}

absl::StatusOr<std::vector<std::string>> Choices(const json& value, const std::string& field) {
  if (!value.is_array() || value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be a non-empty list of strings"));
  }
  std::vector<std::string> choices;
  for (const json& choice : value) {
    if (!choice.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be a non-empty list of strings"));
    }
    choices.push_back(choice.get<std::string>());
  }
  return choices;
}

// Collects the constraints a request sets, refusing a second one.
class ConstraintReader {
 public:
  explicit ConstraintReader(runtime::OutputConstraint* out) : out_(out) {}

  absl::Status Set(const std::string& field, runtime::OutputConstraint constraint) {
    if (!first_field_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("'", first_field_, "' and '", field,
                                                     "' both constrain the output: set one"));
    }
    first_field_ = field;
    *out_ = std::move(constraint);
    return absl::OkStatus();
  }

  // One of vLLM's constraint fields (structured_outputs' keys, or the guided_* ones) by kind.
  absl::Status Read(const json& value, const std::string& field, Kind kind) {
    runtime::OutputConstraint constraint{.kind = kind};
    switch (kind) {
      case Kind::kJsonSchema: {
        ASSIGN_OR_RETURN(constraint.text, SchemaText(value, field));
        break;
      }
      case Kind::kRegex:
      case Kind::kGrammar: {
        ASSIGN_OR_RETURN(constraint.text, Text(value, field));
        break;
      }
      case Kind::kChoice: {
        ASSIGN_OR_RETURN(constraint.choices, Choices(value, field));
        break;
      }
      case Kind::kJsonObject:
        if (!value.is_boolean()) return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be true or false"));
        if (!value.get<bool>()) return absl::OkStatus();
        break;
      case Kind::kNone: return absl::OkStatus();
    }
    return Set(field, std::move(constraint));
  }

 private:
  runtime::OutputConstraint* out_;
  std::string first_field_;
};

absl::Status ReadResponseFormat(const json& format, ConstraintReader& reader) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    return absl::InvalidArgumentError("'response_format' must be an object with a string 'type'");
  }
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") return reader.Set("response_format", {.kind = Kind::kJsonObject});
  if (type == "json_schema") {
    if (!Present(format, "json_schema") || !format["json_schema"].is_object()) {
      return absl::InvalidArgumentError("'response_format': type json_schema needs a 'json_schema' object");
    }
    const json& spec = format["json_schema"];
    runtime::OutputConstraint constraint{.kind = Kind::kJsonSchema};
    // OpenAI's json_schema carries the schema under "schema"; without one, any JSON (as vLLM).
    if (Present(spec, "schema")) {
      ASSIGN_OR_RETURN(constraint.text, SchemaText(spec["schema"], "response_format.json_schema.schema"));
    } else {
      constraint.kind = Kind::kJsonObject;
    }
    if (Present(spec, "strict")) {
      if (!spec["strict"].is_boolean()) {
        return absl::InvalidArgumentError("'response_format.json_schema.strict' must be true or false");
      }
      constraint.strict = spec["strict"].get<bool>();
    }
    return reader.Set("response_format", std::move(constraint));
  }
  if (type == "structural_tag") {
    return absl::InvalidArgumentError("'response_format': type structural_tag is not supported yet");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'response_format': unknown type '", type, "' (text, json_object or json_schema)"));
}

}  // namespace

absl::Status ReadStructuredOutputs(const json& body, runtime::OutputConstraint* out) {
  *out = runtime::OutputConstraint{};
  ConstraintReader reader(out);
  if (Present(body, "response_format")) RETURN_IF_ERROR(ReadResponseFormat(body["response_format"], reader));
  const std::pair<const char*, Kind> kFields[] = {{"json", Kind::kJsonSchema},
                                                  {"regex", Kind::kRegex},
                                                  {"choice", Kind::kChoice},
                                                  {"grammar", Kind::kGrammar},
                                                  {"json_object", Kind::kJsonObject}};
  if (Present(body, "structured_outputs")) {
    const json& structured = body["structured_outputs"];
    if (!structured.is_object()) return absl::InvalidArgumentError("'structured_outputs' must be an object");
    for (const auto& [key, value] : structured.items()) {
      if (value.is_null()) continue;
      bool known = false;
      for (const auto& [field, kind] : kFields) {
        if (key != field) continue;
        known = true;
        RETURN_IF_ERROR(reader.Read(value, absl::StrCat("structured_outputs.", key), kind));
      }
      if (key == "disable_any_whitespace") {
        if (!value.is_boolean()) {
          return absl::InvalidArgumentError("'structured_outputs.disable_any_whitespace' must be true or false");
        }
        continue;  // applied below, to whichever constraint is set
      }
      // vLLM's knobs that change nothing here: the backend is xgrammar whatever it names.
      if (!known && key != "disable_fallback" &&
          key != "disable_additional_properties" && key != "whitespace_pattern" && key != "backend") {
        return absl::InvalidArgumentError(
            absl::StrCat("'structured_outputs': '", key, "' is not supported (json, regex, choice, grammar, json_object)"));
      }
    }
  }
  for (const auto& [field, kind] : kFields) {
    const std::string guided = absl::StrCat("guided_", field);
    if (Present(body, guided.c_str())) RETURN_IF_ERROR(reader.Read(body[guided], guided, kind));
  }
  if (Present(body, "structured_outputs") && body["structured_outputs"].is_object() &&
      body["structured_outputs"].value("disable_any_whitespace", false)) {
    out->any_whitespace = false;
  }
  return absl::OkStatus();
}

}  // namespace baton::scheduler
