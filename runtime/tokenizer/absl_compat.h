// The pinned abseil (Debian 20220623) is built with its own absl::string_view, not std::string_view,
// so the two do not convert implicitly. These helpers bridge them for abseil calls (StrCat, hash
// maps keyed by std::string looked up without a copy).
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace baton::runtime {

inline absl::string_view ToAbsl(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

inline std::string_view ToStd(absl::string_view text) {
  return std::string_view(text.data(), text.size());
}

}  // namespace baton::runtime
