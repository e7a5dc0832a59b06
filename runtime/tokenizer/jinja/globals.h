// The functions a chat template can call by name: jinja2's range, namespace and dict, plus the
// two transformers adds, raise_exception(message) and strftime_now(format).
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tokenizer/jinja/operators.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

// `now`: the time strftime_now formats (local time zone); nullopt reads the clock at each call.
std::vector<std::pair<std::string, Value>> MakeGlobals(std::optional<std::time_t> now,
                                                       const SizeLimits& limits);

}  // namespace baton::runtime::jinja
