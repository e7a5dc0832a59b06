#include "scheduler/service/openai_tools.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "scheduler/service/openai_structured_outputs.h"

namespace baton::scheduler {
namespace {

using nlohmann::json;

struct Tool {
  std::string name;
  json parameters;  // a JSON schema
};

absl::StatusOr<std::vector<Tool>> ReadTools(const json& body) {
  std::vector<Tool> tools;
  if (!body.contains("tools") || body["tools"].is_null()) return tools;
  const json& list = body["tools"];
  if (!list.is_array()) return absl::InvalidArgumentError("'tools' must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = absl::StrCat("tools[", i, "]");
    const json& tool = list[i];
    if (!tool.is_object() || tool.value("type", json("function")) != "function" || !tool.contains("function") ||
        !tool["function"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", field, "' must be {\"type\": \"function\", \"function\": {...}}"));
    }
    const json& function = tool["function"];
    if (!function.contains("name") || !function["name"].is_string() || function["name"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("'", field, ".function.name' must be a non-empty string"));
    }
    Tool read{.name = function["name"].get<std::string>(), .parameters = {{"type", "object"}}};
    if (function.contains("parameters") && !function["parameters"].is_null()) {
      if (!function["parameters"].is_object()) {
        return absl::InvalidArgumentError(absl::StrCat("'", field, ".function.parameters' must be a JSON schema object"));
      }
      RETURN_IF_ERROR(CheckSchemaDepth(function["parameters"], field + ".function.parameters"));
      read.parameters = function["parameters"];
    }
    tools.push_back(std::move(read));
  }
  return tools;
}

// "required": a list of one or more calls (exactly one unless parallel), each to one of the tools
// with its arguments.
json RequiredCallsSchema(const std::vector<Tool>& tools, bool parallel) {
  json any_of = json::array();
  for (const Tool& tool : tools) {
    any_of.push_back({{"type", "object"},
                      {"properties", {{"name", {{"type", "string"}, {"enum", {tool.name}}}}, {"parameters", tool.parameters}}},
                      {"required", {"name", "parameters"}}});
  }
  json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "object"}, {"anyOf", std::move(any_of)}}}};
  if (!parallel) schema["maxItems"] = 1;
  return schema;
}

absl::Status ForceCalls(json schema, GenerateRequest* request) {
  if (request->params.constraint.active()) {
    return absl::InvalidArgumentError(
        "'tool_choice' required or a named function constrains the output: it cannot be combined with "
        "response_format or structured_outputs");
  }
  // Strict (as vLLM compiles it): no properties beyond those a schema names, or the model may go on
  // adding some for ever. Compact: arguments as OpenAI's look, no tokens spent on whitespace.
  request->params.constraint = {.kind = runtime::OutputConstraint::Kind::kJsonSchema,
                                .text = schema.dump(),
                                .strict = true,
                                .any_whitespace = false};
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateChatReplyOptions(const ChatReplyOptions& options) {
  if (!options.tool_call_parser.empty()) RETURN_IF_ERROR(FindToolCallFormat(options.tool_call_parser).status());
  if (!options.reasoning_parser.empty()) RETURN_IF_ERROR(FindReasoningFormat(options.reasoning_parser).status());
  if (options.enable_auto_tool_choice && options.tool_call_parser.empty()) {
    return absl::InvalidArgumentError("--enable-auto-tool-choice needs --tool-call-parser");
  }
  return absl::OkStatus();
}

absl::StatusOr<ChatReplyPlan> ReadToolChoice(const json& body, const ChatReplyOptions& options,
                                             GenerateRequest* request) {
  ChatReplyPlan plan;
  if (!options.reasoning_parser.empty()) {
    ASSIGN_OR_RETURN(plan.reasoning, FindReasoningFormat(options.reasoning_parser));
  }
  ASSIGN_OR_RETURN(const std::vector<Tool> tools, ReadTools(body));
  const bool auto_possible = options.enable_auto_tool_choice && !options.tool_call_parser.empty();
  json choice = body.contains("tool_choice") && !body["tool_choice"].is_null()
                    ? body["tool_choice"]
                    : json(!tools.empty() && auto_possible ? "auto" : "none");
  if (choice == "none") return plan;
  if (tools.empty()) return absl::InvalidArgumentError("'tool_choice' needs 'tools'");
  if (choice == "auto") {
    if (!auto_possible) {
      return absl::InvalidArgumentError(
          "'tool_choice' \"auto\" needs the server started with --enable-auto-tool-choice and "
          "--tool-call-parser");
    }
    ASSIGN_OR_RETURN(plan.tool_calls, FindToolCallFormat(options.tool_call_parser));
    plan.finish_with_tool_calls = true;
    request->skip_special_tokens = false;  // the formats' markers are often special tokens
    return plan;
  }
  if (choice == "required") {
    bool parallel = true;
    if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
      if (!body["parallel_tool_calls"].is_boolean()) {
        return absl::InvalidArgumentError("'parallel_tool_calls' must be true or false");
      }
      parallel = body["parallel_tool_calls"].get<bool>();
    }
    RETURN_IF_ERROR(ForceCalls(RequiredCallsSchema(tools, parallel), request));
    plan.tool_calls = RequiredCallsFormat();
    plan.finish_with_tool_calls = true;
    return plan;
  }
  if (!choice.is_object() || choice.value("type", json()) != "function" || !choice.contains("function") ||
      !choice["function"].is_object() || !choice["function"].contains("name") ||
      !choice["function"]["name"].is_string()) {
    return absl::InvalidArgumentError(
        "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
        "{\"name\": ...}}");
  }
  const std::string name = choice["function"]["name"].get<std::string>();
  for (const Tool& tool : tools) {
    if (tool.name != name) continue;
    RETURN_IF_ERROR(ForceCalls(tool.parameters, request));
    plan.tool_calls = NamedCallFormat(name);
    return plan;
  }
  return absl::InvalidArgumentError(absl::StrCat("'tool_choice' names '", name, "', which is not in 'tools'"));
}

}  // namespace baton::scheduler
