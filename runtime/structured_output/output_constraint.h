// OutputConstraint: what a request's generated text must match (structured outputs), as the APIs
// spell it: OpenAI's response_format (json_object, json_schema) and vLLM's structured_outputs /
// guided_* fields (json, regex, choice, grammar). A plain value that travels with the request; the
// engine compiles it (constraint_compiler.h) where it samples.
#pragma once

#include <string>
#include <vector>

namespace baton::runtime {

struct OutputConstraint {
  enum class Kind {
    kNone,        // unconstrained
    kJsonObject,  // any JSON object (response_format json_object)
    kJsonSchema,  // `text` is a JSON schema (response_format json_schema, structured_outputs.json)
    kRegex,       // `text` is a regular expression the whole output matches
    kChoice,      // exactly one of `choices`
    kGrammar,     // `text` is an EBNF (GBNF) grammar whose start rule is `root`
  };
  Kind kind = Kind::kNone;
  std::string text;
  std::vector<std::string> choices;
  // kJsonSchema: false lets objects carry properties the schema does not name (OpenAI's
  // strict: false); true (the default, as xgrammar and vLLM) allows only the named ones.
  bool strict = true;
  // JSON kinds: false writes JSON as Python's json.dumps does (", " and ": ", no other whitespace;
  // vLLM's disable_any_whitespace); true allows whitespace between tokens (at most 16 in a row).
  bool any_whitespace = true;

  bool active() const { return kind != Kind::kNone; }
  friend bool operator==(const OutputConstraint&, const OutputConstraint&) = default;
};

// "json_object", "json_schema", "regex", "choice", "grammar" or "none": the names errors and
// metrics use.
inline const char* OutputConstraintKindName(OutputConstraint::Kind kind) {
  switch (kind) {
    case OutputConstraint::Kind::kNone: return "none";
    case OutputConstraint::Kind::kJsonObject: return "json_object";
    case OutputConstraint::Kind::kJsonSchema: return "json_schema";
    case OutputConstraint::Kind::kRegex: return "regex";
    case OutputConstraint::Kind::kChoice: return "choice";
    case OutputConstraint::Kind::kGrammar: return "grammar";
  }
  return "unknown";
}

}  // namespace baton::runtime
