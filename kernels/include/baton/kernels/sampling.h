// Next-token sampling from logits: greedy, temperature, top-k, top-p; and top-k log-probabilities.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::kernels {

struct SamplingOptions {
  float temperature = 0;  // 0 => greedy (argmax); otherwise > 0
  int top_k = 0;          // 0 => off; otherwise keep the k most likely tokens
  float top_p = 1;        // in (0, 1]; 1 => off
};

// A seeded random source for sampling. The same seed gives the same stream on every platform
// (std::mt19937_64 is fully specified, and the uniform float is derived here, not by
// std::uniform_real_distribution). Not thread-safe: one per sequence.
class SamplerRng {
 public:
  explicit SamplerRng(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) with 24 random bits.
  float NextUniform() { return static_cast<float>(engine_() >> 40) * 0x1.0p-24f; }

 private:
  std::mt19937_64 engine_;
};

// Returns the sampled token index. Greedy (temperature == 0): argmax, the lowest index wins ties,
// and `rng` is not advanced. Otherwise: logits / temperature, softmax, keep the top_k most likely
// (ties: lower index first), then the smallest prefix of those (in descending probability) whose
// cumulative probability is >= top_p, renormalize, and draw with one rng.NextUniform().
// InvalidArgument for empty logits, a NaN logit, temperature < 0, top_k < 0 or top_p outside (0, 1].
absl::StatusOr<int32_t> SampleToken(std::span<const float> logits, const SamplingOptions& options,
                                    SamplerRng& rng);

struct TokenLogprob {
  int32_t token_id;
  float logprob;
};

// The k largest entries of log_softmax(logits) in descending order (ties: lower index first);
// min(k, logits.size()) entries, none if k <= 0.
std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int k);

}  // namespace baton::kernels
