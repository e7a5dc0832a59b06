// StopMatcher: finds stop strings in streamed text without ever emitting a part of one.
//
// Feed() takes newly decoded text and returns the part that is safe to emit: text that cannot be the
// beginning of a stop string is released, a possible prefix is held back until the next chunk
// decides it. Once a stop string is complete, stopped() is true and the text before it is returned;
// the stop string itself is not emitted (OpenAI semantics) unless include_stop (vLLM's
// include_stop_str_in_output).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace baton::runtime {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings, bool include_stop = false);

  // may_stop false (vLLM's min_tokens not reached yet): a stop string that completes inside this
  // text does not stop; its possible prefixes are still held back, since one may complete in text
  // fed later with may_stop, which then stops (only a stop string that ends in text fed with
  // may_stop counts, as vLLM checks only the new text).
  std::string Feed(std::string_view text, bool may_stop = true);
  // The held-back text, at the end of a generation that did not stop on a string.
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_strings_;  // non-empty strings only
  bool include_stop_;
  std::string pending_;
  size_t num_unarmed_ = 0;  // pending_'s first bytes that were fed with may_stop false
  bool stopped_ = false;
};

}  // namespace baton::runtime
