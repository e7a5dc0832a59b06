// How a reasoning model writes its thinking, read back (vLLM's --reasoning-parser of the same
// names): the reply's text so far -> its reasoning and the content after it. As with the tool-call
// formats, a pure function of the text whose results only grow, holding back what may still be
// the end of the thinking.
//   deepseek_r1  Thinking until </think>, with or without the <think> that opens it (DeepSeek-R1's
//                templates write the <think> into the prompt); a reply that never closes its
//                thinking is all reasoning.
//   qwen3        Thinking only when the reply opens with <think> (Qwen3 thinks when asked to, and
//                then writes the tag itself); otherwise all content.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::scheduler {

struct ReasoningSplit {
  std::string_view reasoning;
  std::string_view content;  // a suffix of the text, once the thinking is over
};

struct ReasoningFormat {
  std::string name;
  std::function<ReasoningSplit(std::string_view text, bool finished)> split;
};

// InvalidArgument naming the known formats for another name.
absl::StatusOr<ReasoningFormat> FindReasoningFormat(std::string_view name);
const std::vector<std::string>& ReasoningFormatNames();

}  // namespace baton::scheduler
