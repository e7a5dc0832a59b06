// Seeded random inputs for the kernel tests and micro-benchmarks. The same seed gives the same values
// on every platform: the uniform float is derived from std::mt19937_64's bits here, not by
// std::uniform_real_distribution.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/dtype.h"

namespace baton::kernels::reference {

class TestRng {
 public:
  explicit TestRng(uint64_t seed) : engine_(seed) {}

  // Uniform in [lo, hi).
  float Uniform(float lo = -1, float hi = 1) {
    const double u = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
    return static_cast<float>(lo + (hi - lo) * u);
  }
  // Uniform integer in [lo, hi].
  int64_t UniformInt(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// n values uniform in [lo, hi).
inline std::vector<float> RandomVector(size_t n, uint64_t seed, float lo = -1, float hi = 1) {
  TestRng rng(seed);
  std::vector<float> out(n);
  for (float& x : out) x = rng.Uniform(lo, hi);
  return out;
}

// The bf16 encodings of n values uniform in [lo, hi).
inline std::vector<uint16_t> RandomBf16(size_t n, uint64_t seed, float lo = -1, float hi = 1) {
  TestRng rng(seed);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) x = F32ToBf16(rng.Uniform(lo, hi));
  return out;
}

// Rounds every value to bf16 and back (what MatmulCpu does to its bf16 activations).
inline std::vector<float> RoundToBf16(std::vector<float> values) {
  for (float& x : values) x = Bf16ToF32(F32ToBf16(x));
  return values;
}

// The IEEE half (f16) encodings of n values uniform in [lo, hi).
inline std::vector<uint16_t> RandomF16(size_t n, uint64_t seed, float lo = -1, float hi = 1) {
  TestRng rng(seed);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) x = F32ToF16(rng.Uniform(lo, hi));
  return out;
}

// Rounds every value to f16 (nearest even) and back (what MatmulCpu does to its f16 activations).
inline std::vector<float> RoundToF16(std::vector<float> values) {
  for (float& x : values) x = F16ToF32(F32ToF16(x));
  return values;
}

}  // namespace baton::kernels::reference
