// The syntax tree of a parsed template: expressions and statements as kind-tagged structs, built
// by the parser and walked by the interpreter. Owned by the Template; immutable after parsing.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

struct Expr {
  enum class Kind {
    kLiteral,      // value
    kName,         // name
    kList,         // args = items
    kTuple,        // args = items
    kDict,         // args = key0, value0, key1, value1, ...
    kGetAttr,      // args[0].name
    kGetItem,      // args[0][args[1]]
    kSlice,        // args[0][args[1]:args[2]:args[3]]; absent bounds are nullptr
    kUnary,        // name in {"-", "+", "not"}, args[0]
    kBinary,       // name in {"+", "-", "*", "/", "//", "%", "**", "~", "and", "or"}
    kCompare,      // args[0] (ops[i] args[i+1])...; Python-style chaining
    kConditional,  // args[1] if args[0] else args[2]; args[2] may be nullptr (-> Undefined)
    kCall,         // args[0](args[1:], kwargs)
    kFilter,       // args[0] | name(args[1:], kwargs)
    kTest,         // args[0] is [not] name(args[1:], kwargs)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;  // kTest: `is not`
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "not in"
};

// `x`, `ns.attr` or a tuple `a, b` on the left of `set` / after `for`.
struct AssignTarget {
  std::vector<std::string> names;  // one name, or several for unpacking
  std::string attribute;           // non-empty for `set ns.attribute = ...` (names has one entry)
  bool is_tuple = false;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // nullptr when required
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conditions[i] -> bodies[i]; else_body
    kFor,          // for target in expr [if condition]: body; else_body
    kSet,          // set target = expr
    kSetBlock,     // set target %}body{% endset; filters applied to the captured text
    kMacro,        // macro name(params): body
    kCallBlock,    // call(caller_params) expr: body is `caller()`
    kFilterBlock,  // filter f|g: body
    kBreak,
    kContinue,
    kGeneration,   // generation: body (transformers' assistant-mask tag; renders its body)
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  AssignTarget target;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<ExprPtr> conditions;
  std::vector<StmtList> bodies;
  std::vector<ExprPtr> filters;  // kSetBlock / kFilterBlock: kFilter exprs whose args[0] is null
  StmtList body;
  StmtList else_body;
};

}  // namespace baton::runtime::jinja
