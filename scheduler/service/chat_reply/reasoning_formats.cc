#include "scheduler/service/chat_reply/reasoning_formats.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/tokenizer/absl_compat.h"
#include "scheduler/service/chat_reply/json_scan.h"

namespace baton::scheduler {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// The thinking starts at text[begin]: up to </think>, the content after it.
ReasoningSplit ThinkingFrom(std::string_view text, size_t begin, bool finished) {
  const size_t close = text.find(kClose, begin);
  if (close == std::string_view::npos) {
    const std::string_view thinking = text.substr(begin);
    return {.reasoning = thinking.substr(0, thinking.size() - (finished ? 0 : HeldMarkerPrefix(thinking, kClose)))};
  }
  return {.reasoning = text.substr(begin, close - begin), .content = text.substr(close + kClose.size())};
}

ReasoningSplit DeepSeekR1(std::string_view text, bool finished) {
  if (text.starts_with(kOpen)) return ThinkingFrom(text, kOpen.size(), finished);
  if (!finished && kOpen.starts_with(text)) return {};  // may still be the opening tag
  return ThinkingFrom(text, 0, finished);
}

ReasoningSplit Qwen3(std::string_view text, bool finished) {
  if (text.starts_with(kOpen)) return ThinkingFrom(text, kOpen.size(), finished);
  if (!finished && kOpen.starts_with(text)) return {};
  return {.content = text};
}

}  // namespace

const std::vector<std::string>& ReasoningFormatNames() {
  static const std::vector<std::string> names = {"deepseek_r1", "qwen3"};
  return names;
}

absl::StatusOr<ReasoningFormat> FindReasoningFormat(std::string_view name) {
  if (name == "deepseek_r1") return ReasoningFormat{.name = "deepseek_r1", .split = DeepSeekR1};
  if (name == "qwen3") return ReasoningFormat{.name = "qwen3", .split = Qwen3};
  return absl::InvalidArgumentError(absl::StrCat("'", runtime::ToAbsl(name), "' is not a reasoning parser (expected one of ",
                                                 absl::StrJoin(ReasoningFormatNames(), ", "), ")"));
}

}  // namespace baton::scheduler
