// SampleToken per draw over a vocabulary. "peaked" logits look like a language model's (a few
// likely tokens, a long tail); "flat" ones are the worst case for top-p (a huge nucleus).
//   Args: {vocab, shape (0 flat, 1 peaked), top_k, top_p * 100}
#include <cmath>
#include <vector>

#include "baton/kernels/sampling.h"
#include "benchmark/benchmark.h"
#include "kernels/reference/random_tensor.h"

namespace baton::kernels {
namespace {

void BM_SampleToken(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const bool peaked = state.range(1) == 1;
  std::vector<float> logits = kernels::reference::RandomVector(vocab, 1, -1, 1);
  if (peaked) {
    // A Zipf-like spread: logit falls with the log of a random rank.
    kernels::reference::TestRng rng(2);
    for (float& x : logits) x = 12.0f - 2.5f * std::log1p(float(rng.UniformInt(0, vocab)));
  }
  const SamplingOptions options{.temperature = 0.8f,
                                .top_k = static_cast<int>(state.range(2)),
                                .top_p = static_cast<float>(state.range(3)) / 100.0f};
  SamplerRng rng(3);
  for (auto _ : state) {
    auto token = SampleToken(logits, options, rng);
    benchmark::DoNotOptimize(token);
  }
}
BENCHMARK(BM_SampleToken)
    ->ArgsProduct({{32000, 128256}, {0, 1}, {0, 50}, {90, 100}})
    ->Unit(benchmark::kMicrosecond);

void BM_Greedy(benchmark::State& state) {
  const std::vector<float> logits = kernels::reference::RandomVector(state.range(0), 1);
  SamplerRng rng(3);
  for (auto _ : state) {
    auto token = SampleToken(logits, {}, rng);
    benchmark::DoNotOptimize(token);
  }
}
BENCHMARK(BM_Greedy)->Arg(32000)->Arg(128256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace baton::kernels

BENCHMARK_MAIN();
