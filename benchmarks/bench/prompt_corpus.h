// PromptCorpus: prompts of an exact token count made of real text, so that what the server sees
// tokenizes and attends like natural language rather than repeated or random ids.
//
// The corpus is a set of text files (by default the licence texts every Debian system ships in
// /usr/share/common-licenses), tokenized once without special tokens and concatenated in file-name
// order into one token stream. A prompt of n tokens is the tokenizer's special prefix (BOS, as
// Encode(text, true) would add it) followed by a window of the stream starting at a random offset,
// wrapping around at its end. The server receives these ids as they are, so the prompt length is
// exact whatever the tokenizer.
//
// Immutable after Create; Build is const and thread-compatible (the Rng is the caller's).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmarks/bench/rng.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::bench {

inline constexpr char kDefaultCorpusDir[] = "/usr/share/common-licenses";

class PromptCorpus {
 public:
  // `source` is a file or a directory whose regular files (symlinks skipped, so that a file linked
  // under two names counts once) are read in name order. NotFound if it does not exist;
  // InvalidArgument if its text has fewer than 1024 tokens.
  static absl::StatusOr<std::unique_ptr<PromptCorpus>> Create(const runtime::Tokenizer& tokenizer,
                                                              const std::filesystem::path& source);
  // The same from token ids (tests). Pre-condition: stream_ids is not empty.
  PromptCorpus(std::vector<int32_t> stream_ids, std::vector<int32_t> prefix_ids);

  // [num_tokens] ids: the special prefix (cut if num_tokens is shorter) then corpus text.
  // Pre-condition: num_tokens >= 1.
  std::vector<int32_t> Build(int num_tokens, Rng& rng) const;
  // [num_tokens] ids of corpus text alone, from a random offset: what follows a prompt's start (a
  // question after a system prompt, a conversation's next message). Pre-condition: num_tokens >= 0.
  std::vector<int32_t> Continue(int num_tokens, Rng& rng) const;

  int num_stream_tokens() const { return static_cast<int>(stream_ids_.size()); }

 private:
  std::vector<int32_t> stream_ids_;  // [num_stream_tokens]
  std::vector<int32_t> prefix_ids_;  // [num_prefix_tokens], usually BOS
};

}  // namespace baton::bench
