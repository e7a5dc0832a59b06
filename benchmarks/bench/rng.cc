#include "benchmarks/bench/rng.h"

#include <cmath>
#include <numbers>

#include "kernels/common/check.h"

namespace baton::bench {

uint64_t DeriveSeed(uint64_t seed, uint64_t stream_idx) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream_idx + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::Uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  BATON_CHECK(lo <= hi);
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(engine_());  // the whole int64 range
  // Rejection keeps the draw exactly uniform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t draw;
  do {
    draw = engine_();
  } while (draw >= limit);
  return lo + static_cast<int64_t>(draw % span);
}

double Rng::Normal() {
  // 1 - U is in (0, 1], so the log is finite.
  const double u1 = 1.0 - Uniform01();
  const double u2 = Uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::Exponential(double mean) {
  BATON_CHECK(mean > 0);
  return -mean * std::log(1.0 - Uniform01());
}

double Rng::Gamma(double shape, double scale) {
  BATON_CHECK(shape > 0 && scale > 0);
  if (shape < 1.0) {
    const double u = 1.0 - Uniform01();
    return Gamma(shape + 1.0, scale) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x;
    double v;
    do {
      x = Normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - Uniform01();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v * scale;
  }
}

}  // namespace baton::bench
