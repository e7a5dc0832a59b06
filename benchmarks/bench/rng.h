// Rng: the load generator's one source of randomness. Every draw is computed here from
// std::mt19937_64's raw output (whose sequence the C++ standard fixes), never through the standard
// library's distributions (whose algorithms differ between libstdc++ and libc++), so that a seed
// gives the same workload and arrival times on every platform.
//
// Not thread-safe: one Rng per thread of use (the bench draws everything before a run starts).
#pragma once

#include <cstdint>
#include <random>

namespace baton::bench {

// An independent seed for stream `stream_idx` of a run seeded with `seed` (SplitMix64 of both), so
// that lengths, prompts and arrival gaps each have their own stream: changing the rate changes no
// length, and the gaps of two rates differ only by their scale.
uint64_t DeriveSeed(uint64_t seed, uint64_t stream_idx);

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1), 53 random bits.
  double Uniform01();
  // Uniform integer in [lo, hi] (inclusive). Pre-condition: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);
  // Standard normal (Box-Muller).
  double Normal();
  // Exponential with mean `mean` (> 0).
  double Exponential(double mean);
  // Gamma with shape k (> 0) and scale theta (> 0): mean k * theta, variance k * theta^2.
  // Marsaglia and Tsang's method; for k < 1 the k + 1 draw times U^(1/k).
  double Gamma(double shape, double scale);

 private:
  std::mt19937_64 engine_;
};

}  // namespace baton::bench
