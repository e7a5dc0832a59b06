#include "runtime/tokenizer/text_stream.h"

#include <utility>

namespace baton::runtime {

TextStream::TextStream(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                       std::vector<std::string> stop_strings, int min_tokens, bool include_stop,
                       bool skip_special_tokens)
    : detokenizer_(tokenizer, skip_special_tokens, prompt_ids),
      stop_(std::move(stop_strings), include_stop),
      min_tokens_(min_tokens) {}

std::string TextStream::Append(int32_t id) {
  if (stop_.stopped()) return "";
  ++num_appended_;
  return stop_.Feed(detokenizer_.Step(id), num_appended_ > min_tokens_);
}

std::string TextStream::Finish() {
  if (stop_.stopped()) return "";
  // The detokenizer's tail may still complete a stop string; only then is the matcher's own
  // held-back text (a prefix of a stop string that never completed) released.
  std::string text = stop_.Feed(detokenizer_.Flush(), num_appended_ > min_tokens_);
  if (!stop_.stopped()) text += stop_.Flush();
  return text;
}

}  // namespace baton::runtime
