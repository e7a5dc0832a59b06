// Runs a parsed template: statements write to an output buffer, expressions evaluate to Values.
// Scoping follows jinja2: each for-loop iteration and each macro call gets a fresh scope whose
// `set`s vanish at its end (hence templates' use of namespace()), while `if` bodies share their
// enclosing scope. Every limit in RenderLimits fails the render with ResourceExhausted.
// One Interpreter renders once; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/ast.h"
#include "runtime/tokenizer/jinja/call_args.h"
#include "runtime/tokenizer/jinja/operators.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;  // the rendering, and any one string value
  size_t max_list_items = size_t{1} << 20;     // any one list (range(), +, *)
  int64_t max_iterations = 1'000'000;          // loop iterations plus macro calls, whole render
  int max_call_depth = 64;                     // nested macro calls
};

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}

  // The innermost binding of `name`, or nullptr.
  const Value* Lookup(std::string_view name) const;
  // Binds `name` in this scope (shadowing outer ones).
  void Set(std::string_view name, Value value);

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits);

  // Renders `body` with `root` as the outermost scope (globals and the caller's variables).
  absl::StatusOr<std::string> Render(const StmtList& body, std::shared_ptr<Scope> root);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using ScopePtr = std::shared_ptr<Scope>;

  absl::StatusOr<Flow> ExecBody(const StmtList& body, const ScopePtr& scope);
  absl::StatusOr<Flow> Exec(const Stmt& stmt, const ScopePtr& scope);
  absl::StatusOr<Flow> ExecFor(const Stmt& stmt, const ScopePtr& scope);
  absl::Status ExecSet(const Stmt& stmt, const ScopePtr& scope, Value value);
  absl::Status BindTarget(const AssignTarget& target, const Value& value, Scope* scope, int line);
  Value MakeMacro(const Stmt& stmt, const ScopePtr& scope);
  // Runs `body` in `scope` with its output captured instead of written.
  absl::StatusOr<std::string> Capture(const StmtList& body, const ScopePtr& scope);
  absl::StatusOr<Value> ApplyFilterChain(const std::vector<ExprPtr>& filters, Value input,
                                         const ScopePtr& scope);
  absl::Status Emit(std::string_view text);
  absl::Status CountIteration(int line);

  absl::StatusOr<Value> Eval(const Expr& expr, const ScopePtr& scope);
  absl::StatusOr<Value> EvalInner(const Expr& expr, const ScopePtr& scope);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& expr, size_t first_arg, const ScopePtr& scope);
  absl::StatusOr<Value> CheckDepth(Value value, int line) const;

  RenderLimits limits_;
  SizeLimits size_limits_;
  std::string* out_ = nullptr;
  int64_t num_iterations_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
};

// Prefixes "chat template line N: " to an error raised below a statement or expression, unless it
// already names a line or carries the raise_exception payload (the template's own message).
absl::Status WithLine(absl::Status status, int line);

// The payload key that marks an error raised by the template through raise_exception().
inline constexpr char kRaisedPayload[] = "baton.jinja/raise_exception";

}  // namespace baton::runtime::jinja
