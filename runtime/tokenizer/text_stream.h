// TextStream: the text of one generation as it streams — incremental detokenization followed by
// stop-string matching, the one place where the scheduler and `baton generate` turn generated token
// ids into the text a client sees.
//
// The rules (OpenAI semantics, as vLLM applies them):
//   - Text is emitted as soon as it is safe: never a partial UTF-8 character (IncrementalDetokenizer),
//     never a part of a stop string (StopMatcher holds back a possible prefix until it is decided).
//   - When a stop string completes, stopped() becomes true: the text before it is the last text of
//     the generation, the stop string itself is never emitted, and ids appended later are ignored.
//     The generation's finish reason is then "stop", whatever the generator reported for the token.
//   - When the generator ends on its own (EOS, a stop token id, max_tokens), Finish() releases what
//     was held back; a stop string can still complete in that tail, which makes the reason "stop".
//
// Lifecycle: construct per generation, Append each generated id in order, then call Finish once when
// the generator reports the end (not needed after stopped()). Not thread-safe; the Tokenizer must
// outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/tokenizer/incremental_detokenizer.h"
#include "runtime/tokenizer/stop_matcher.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::runtime {

class TextStream {
 public:
  // prompt_ids: the text continues the prompt (a first token's leading space comes out right).
  // Empty stop strings are ignored (the front ends reject them before). min_tokens: a stop string
  // ends the generation only in the text of the ids after the first min_tokens (vLLM).
  // include_stop: the stop string that ends the text is emitted too. skip_special_tokens false:
  // special tokens are text like any other (a tool-call format's markers).
  TextStream(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
             std::vector<std::string> stop_strings, int min_tokens = 0, bool include_stop = false,
             bool skip_special_tokens = true);

  // Feeds one generated id; returns the text that is now safe to emit (often empty). Returns ""
  // once stopped().
  std::string Append(int32_t id);

  // The generator ended after the ids appended so far: returns the text still held back, up to a
  // stop string that completes in it. Returns "" when stopped() already.
  std::string Finish();

  // A stop string completed: the generation is over, with finish reason "stop".
  bool stopped() const { return stop_.stopped(); }

 private:
  IncrementalDetokenizer detokenizer_;
  StopMatcher stop_;
  int min_tokens_;
  int num_appended_ = 0;
};

}  // namespace baton::runtime
