// Next-token sampling from logits: greedy, temperature, top-k, top-p; and top-k log-probabilities.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "baton/kernels/philox.h"

namespace baton::kernels {

struct SamplingOptions {
  float temperature = 0;  // 0 => greedy (argmax); otherwise > 0
  int top_k = 0;          // 0 => off; otherwise keep the k most likely tokens
  float top_p = 1;        // in (0, 1]; 1 => off
  // In [0, 1]; 0 => off. Keeps the tokens whose probability (after temperature) is at least min_p
  // times the most likely one's; applied after top-k and top-p (which it cannot change: the ratio
  // of two probabilities does not depend on what else was cut).
  float min_p = 0;
};

// A sequence's random stream for sampling: draw n is SamplerBits24(seed, n) (philox.h), a pure
// function of (seed, n) that the CUDA sampling kernel computes too. The object is only a cursor
// over that stream (the seed and the index of the next draw), so a worker continues another's stream by
// constructing it at the right index: the engine uses the index of the token being generated.
// Not thread-safe: one per sequence (or per draw).
class SamplerRng {
 public:
  explicit SamplerRng(uint64_t seed, uint64_t draw_idx = 0) : seed_(seed), draw_idx_(draw_idx) {}

  // The next draw's 24 random bits, and advances.
  uint32_t NextBits24() { return SamplerBits24(seed_, draw_idx_++); }
  // The next draw as a float uniform on [0, 1): NextBits24() * 2^-24, exact.
  float NextUniform() { return static_cast<float>(NextBits24()) * 0x1.0p-24f; }

  uint64_t seed() const { return seed_; }
  uint64_t draw_idx() const { return draw_idx_; }

 private:
  uint64_t seed_;
  uint64_t draw_idx_;
};

// InvalidArgument for temperature < 0 or not finite, top_k < 0, top_p outside (0, 1], or min_p
// outside [0, 1].
absl::Status ValidateSamplingOptions(const SamplingOptions& options);

// Returns the sampled token index, as specified in sample.h (the device op computes the same
// token bit for bit). Greedy (temperature == 0): argmax, the lowest index wins ties, and `rng` is
// not advanced. Otherwise: logits / temperature, softmax (in 40-bit fixed point), keep the top_k
// most likely (ties: lower index first), then the smallest prefix of those (in descending
// probability) whose cumulative probability is >= top_p, then of those the ones whose weight reaches
// MinPWeight(min_p) (sample.h), renormalize, and draw with one
// rng.NextBits24() (inverse CDF over the kept tokens in ascending index order).
// InvalidArgument for empty logits, a NaN logit, or options that fail ValidateSamplingOptions.
absl::StatusOr<int32_t> SampleToken(std::span<const float> logits, const SamplingOptions& options,
                                    SamplerRng& rng);

struct TokenLogprob {
  int32_t token_id;
  float logprob;
  int32_t rank = 0;  // 1 + the number of tokens more likely (vLLM's rank); 0: not known
};

// The k largest entries of log_softmax(logits) in descending order (ties: lower index first), ranked
// 1..k; min(k, logits.size()) entries, none if k <= 0. With `sampled` (a token id in range) not
// among them, its entry follows, last (alone when k is 0), ranked by the logits above its own:
// OpenAI's logprobs always include the sampled token.
std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int k, int32_t sampled = -1);

}  // namespace baton::kernels
