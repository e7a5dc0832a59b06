// Streams text out of a growing sequence of token ids, one id at a time, the way vLLM and
// `tokenizers`' DecodeStream do: it decodes a small window of recent ids and emits the part that
// is new, so context-dependent decoding (SentencePiece's leading-space strip, byte-fallback runs,
// byte-level tokens that split a character) comes out right.
//
// Guarantees:
//  - Step never returns a partial UTF-8 character: bytes that end mid-character are held back
//    until a later id completes them (or Flush gives up on them, as U+FFFD like `tokenizers`).
//  - The concatenation of every Step and the final Flush equals tokenizer.Decode(all ids fed,
//    skip_special_tokens), for byte-level tokenizers on any ids and for SentencePiece-style ones
//    whenever their byte-fallback runs are valid UTF-8. (A run that turns out invalid after part
//    of it was emitted is rendered as U+FFFD per byte from there on, while Decode would also turn
//    the already-emitted characters of that run into U+FFFD.)
//  - With `context_ids` (the prompt), the stream continues that text: the first generated token
//    gets its leading space as it would have after the prompt.
//
// Lifecycle: construct per request, call Step for each generated id, then Flush once. Not
// thread-safe (one request, one thread); the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace baton::runtime {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens,
                         std::span<const int32_t> context_ids = {});

  // Feeds one id; returns the text it completes (often empty, never a partial character).
  std::string Step(int32_t id);

  // Returns whatever is still held back; call after the last Step. Further Steps start afresh
  // from the current window.
  std::string Flush();

 private:
  // Emits the new text of the window, if any; `force` emits even a trailing partial character.
  std::string EmitNew(bool force);

  static constexpr size_t kNumContextIds = 6;

  const Tokenizer& tokenizer_;
  const bool skip_special_tokens_;
  std::vector<int32_t> window_;  // [num_window_ids]: the ids whose text is being diffed
  size_t num_read_ = 0;          // window_[0, num_read_) decode to prefix_text_, already emitted
  std::string prefix_text_;
};

}  // namespace baton::runtime
