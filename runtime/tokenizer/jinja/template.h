// A compiled Jinja2 template with the environment transformers renders chat templates in:
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols and the
// `generation` tag), its tojson override, raise_exception and strftime_now, default Undefined.
//
// Lifecycle: Parse once (validates syntax and filter/test names), then Render any number of times;
// Render is const and may run concurrently on one Template.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/ast.h"
#include "runtime/tokenizer/jinja/interpreter.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

struct RenderOptions {
  RenderLimits limits;
  std::optional<std::time_t> now;  // what strftime_now formats; nullopt reads the clock
};

class Template {
 public:
  // InvalidArgument("chat template line N: ...") for syntax errors, unknown filters or tests and
  // unsupported tags; ResourceExhausted for nesting beyond the parser's limit.
  static absl::StatusOr<Template> Parse(std::string_view source);

  // Renders with `variables` (name, value) on top of the globals. InvalidArgument for template
  // errors (undefined values used, type errors, raise_exception: its message verbatim),
  // ResourceExhausted when a limit in options.limits is hit.
  absl::StatusOr<std::string> Render(const std::vector<std::pair<std::string, Value>>& variables,
                                     const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const StmtList> body) : body_(std::move(body)) {}
  std::shared_ptr<const StmtList> body_;
};

}  // namespace baton::runtime::jinja
