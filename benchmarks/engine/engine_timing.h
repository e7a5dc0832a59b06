// Timing an Engine the way the engine benchmarks do: random prompts, greedy requests that ignore
// EOS, prefill and decode tokens per second, medians. Header-only; benchmarks only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/engine/engine.h"

namespace baton::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

inline std::vector<int32_t> RandomPrompt(int len, int vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> ids(len);
  for (auto& id : ids) id = dist(rng);
  return ids;
}

inline runtime::GenerationParams Greedy(int max_tokens) {
  runtime::GenerationParams params;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

// Tokens/s of the prefill of `num_prompts` random prompts of `prompt_len` tokens added together.
inline double PrefillTokensPerSecond(runtime::Engine& engine, int num_prompts, int prompt_len,
                                     std::mt19937& rng) {
  for (int i = 0; i < num_prompts; ++i) {
    (void)*engine.AddRequest(RandomPrompt(prompt_len, engine.model_config().vocab_size, rng),
                             Greedy(1));
  }
  const auto start = Clock::now();
  while (engine.HasWork()) (void)*engine.Step();
  return num_prompts * prompt_len / Seconds(Clock::now() - start);
}

// Decode tokens/s summed over `batch` sequences, timed once all of them are decoding.
inline double DecodeTokensPerSecond(runtime::Engine& engine, int batch, int context_len,
                                    int num_steps, std::mt19937& rng) {
  for (int i = 0; i < batch; ++i) {
    (void)*engine.AddRequest(RandomPrompt(context_len, engine.model_config().vocab_size, rng),
                             Greedy(num_steps + 1));
  }
  int num_started = 0;
  while (num_started < batch) num_started += static_cast<int>(engine.Step()->size());
  int64_t num_tokens = 0;
  const auto start = Clock::now();
  while (engine.HasWork()) num_tokens += static_cast<int64_t>(engine.Step()->size());
  return num_tokens / Seconds(Clock::now() - start);
}

}  // namespace baton::bench
