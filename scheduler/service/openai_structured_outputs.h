// The structured-outputs fields of an OpenAI request, read into one OutputConstraint: OpenAI's
// response_format ({"type": "text" | "json_object" | "json_schema"}), vLLM's structured_outputs
// object ({"json" | "regex" | "choice" | "grammar" | "json_object": ...}) and its older guided_json,
// guided_regex, guided_choice and guided_grammar fields. Shared by /v1/completions and
// /v1/chat/completions. Whether the constraint compiles is the request driver's to check.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "runtime/structured_output/output_constraint.h"

namespace baton::scheduler {

// InvalidArgument naming the field for a wrong shape, an unknown response_format type, a
// constraint this server does not support (structural tags) or more than one constraint.
absl::Status ReadStructuredOutputs(const nlohmann::json& body, runtime::OutputConstraint* out);

// Schemas (and tools' parameters) nested deeper than this are refused before anything walks them
// recursively (dump, the grammar compiler): a small body of nested brackets must not exhaust a
// thread's stack. InvalidArgument naming `field`.
inline constexpr int kMaxSchemaDepth = 64;
absl::Status CheckSchemaDepth(const nlohmann::json& value, const std::string& field);

}  // namespace baton::scheduler
