// Element-wise closeness for kernel tests: every element must satisfy |a - b| <= atol + rtol * |b|,
// where b is the expected (reference) value. No "most elements close" escape hatch. On failure the
// message gives the number of violations, the worst element (index, both values, abs error) and the
// NMSE sum((a-b)^2) / sum(b^2) (ggml's metric).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <ostream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "kernels/common/dtype.h"

namespace baton::testing {

struct Tolerance {
  double atol;
  double rtol;
};

// The one table of per-dtype tolerances: `dtype` is the precision the compared computation carries
// its inputs in (f32 math with f32 inputs, or f32 math on bf16/f16-rounded inputs compared with an
// exact reference). Ops that accumulate long sums pass a scaled tolerance (ScaledForSum).
constexpr Tolerance ToleranceFor(DType dtype) {
  switch (dtype) {
    case DType::kF32: return {.atol = 1e-5, .rtol = 1e-5};
    case DType::kF16: return {.atol = 1e-3, .rtol = 1e-3};
    case DType::kBF16: return {.atol = 8e-3, .rtol = 8e-3};
    case DType::kI8: return {.atol = 8e-3, .rtol = 8e-3};  // its products take bf16 activations
    // bf16 activations, and prefill-sized products round the dequantized weights to bf16 too.
    case DType::kI4:
    case DType::kF8E4M3: return {.atol = 8e-3, .rtol = 8e-3};
  }
  return {.atol = 0, .rtol = 0};
}

// A dot product of `length` terms each of magnitude about `term_scale` carries a rounding error that
// grows like sqrt(length): scale atol accordingly (rtol is unchanged).
inline Tolerance ScaledForSum(Tolerance base, int64_t length, double term_scale = 1.0) {
  return {.atol = base.atol * std::sqrt(static_cast<double>(length)) * term_scale,
          .rtol = base.rtol};
}

// Returns success iff actual.size() == expected.size() and every element is close (NaN only
// matches NaN).
inline ::testing::AssertionResult AllClose(std::span<const float> actual,
                                           std::span<const float> expected, Tolerance tol) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size mismatch: actual " << actual.size() << ", expected " << expected.size();
  }
  int64_t num_bad = 0;
  int64_t worst_idx = -1;
  double worst_excess = -1;  // |a-b| - allowed, maximized over elements
  double max_abs_err = 0;
  int64_t max_abs_idx = -1;
  double sq_err = 0;
  double sq_ref = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double b = expected[i];
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) && std::isnan(b)) continue;
      ++num_bad;
      worst_idx = static_cast<int64_t>(i);
      worst_excess = INFINITY;
      continue;
    }
    const double err = (a == b) ? 0.0 : std::abs(a - b);  // inf == inf
    sq_err += err * err;
    sq_ref += b * b;
    if (err > max_abs_err) {
      max_abs_err = err;
      max_abs_idx = static_cast<int64_t>(i);
    }
    const double excess = err - (tol.atol + tol.rtol * std::abs(b));
    if (excess > 0) {
      ++num_bad;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst_idx = static_cast<int64_t>(i);
      }
    }
  }
  if (num_bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg << num_bad << " of " << actual.size() << " elements outside atol=" << tol.atol
      << " rtol=" << tol.rtol << "; worst at [" << worst_idx << "]: actual "
      << actual[worst_idx] << " expected " << expected[worst_idx] << "; max abs error "
      << max_abs_err << " at [" << max_abs_idx << "]; NMSE "
      << (sq_ref > 0 ? sq_err / sq_ref : sq_err);
  return ::testing::AssertionFailure() << msg.str();
}

// True iff every element is finite.
inline ::testing::AssertionResult AllFinite(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return ::testing::AssertionFailure() << "element [" << i << "] is " << values[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace baton::testing

namespace baton {
// Names DType parameters in gtest output ("bf16" rather than "1-byte object <02>").
inline void PrintTo(DType dtype, std::ostream* os) { *os << DTypeName(dtype); }
}  // namespace baton
