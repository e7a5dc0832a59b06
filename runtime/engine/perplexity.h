// Perplexity of a text under the engine's model, from its prompt logprobs (as lm-evaluation-harness's
// rolling log-likelihood does over the completions API): the text's tokens are cut into disjoint
// windows, each served as one prompt that asks for prompt logprobs, and every token the model sees
// a prefix for is scored once.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/engine.h"

namespace baton::runtime {

struct PerplexityOptions {
  // Tokens of the text per window (>= 2), not counting the prefix token.
  int window = 512;
  // Put before every window (the tokenizer's prefix specials: a model's BOS), so that each window's
  // first text token is scored too; with none each window's first token has no context and goes
  // unscored. The prefix itself is never scored.
  std::vector<int32_t> prefix;
};

struct PerplexityResult {
  int64_t num_scored_tokens = 0;
  double total_nll = 0;  // sum of -log p(token | the window's tokens before it), nats
  int num_windows = 0;

  double mean_nll() const { return num_scored_tokens > 0 ? total_nll / num_scored_tokens : 0; }
  double perplexity() const { return std::exp(mean_nll()); }
};

// The windows' prompts, in text order (ScorePerplexity serves these).
std::vector<std::vector<int32_t>> PerplexityWindows(const std::vector<int32_t>& text_ids,
                                                    const PerplexityOptions& options);

// Serves every window on `engine` (which must be otherwise idle) and sums the scores. Fails on
// empty text, a window below 2 tokens, or a window the engine cannot take (longer than the model's
// context: a smaller window is the fix).
absl::StatusOr<PerplexityResult> ScorePerplexity(Engine& engine, const std::vector<int32_t>& text_ids,
                                                 const PerplexityOptions& options);

}  // namespace baton::runtime
