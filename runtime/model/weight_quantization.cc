#include "runtime/model/weight_quantization.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/dtype.h"

namespace baton::runtime {

void QuantizeRowsInt8(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float max_abs = 0.0f;
    for (int64_t c = 0; c < cols; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
    const float scale = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
    scales[r] = scale;
    int8_t* out = q + r * cols;
    // w / scale, not w * (1 / scale): the reference quantizers divide, and the two differ in the
    // last bit often enough to move a value across a rounding boundary. nearbyint rounds half to
    // even in the default rounding mode; the clamp only guards |w| / scale a hair above 127.
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = static_cast<int8_t>(std::clamp(std::nearbyint(row[c] / scale), -127.0f, 127.0f));
    }
  }
}

void QuantizeRowsFp8(const float* w, int64_t rows, int64_t cols, uint8_t* q, float* scales) {
  constexpr float kFp8Max = 448.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float max_abs = 0.0f;
    for (int64_t c = 0; c < cols; ++c) max_abs = std::max(max_abs, std::fabs(row[c]));
    const float scale = max_abs > 0.0f ? max_abs / kFp8Max : 1.0f;
    scales[r] = scale;
    // Divided, as the reference quantizers do; F32ToFp8E4M3 saturates a quotient a hair above 448.
    for (int64_t c = 0; c < cols; ++c) q[r * cols + c] = F32ToFp8E4M3(row[c] / scale);
  }
}

int Int4GroupSize(int64_t cols) {
  for (int group : {128, 64, 32}) {
    if (cols % group == 0) return group;
  }
  return 0;
}

void PackInt4Row(const uint8_t* u, int64_t cols, uint8_t* packed) {
  for (int64_t run = 0; run < cols; run += 32) {
    for (int b = 0; b < 16; ++b) {
      packed[run / 2 + b] = static_cast<uint8_t>(u[run + b] | (u[run + b + 16] << 4));
    }
  }
}

void QuantizeRowsInt4(const float* w, int64_t rows, int64_t cols, int group_size, uint8_t* packed,
                      float* scales, float* zeros) {
  const int64_t groups = cols / group_size;
  std::vector<uint8_t> u(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = row + g * group_size;
      float lo = 0.0f;
      float hi = 0.0f;
      for (int c = 0; c < group_size; ++c) {
        lo = std::min(lo, x[c]);
        hi = std::max(hi, x[c]);
      }
      const float scale = hi > lo ? (hi - lo) / 15.0f : 1.0f;
      const float zero = std::clamp(std::nearbyint(-lo / scale), 0.0f, 15.0f);
      scales[r * groups + g] = scale;
      zeros[r * groups + g] = zero;
      for (int c = 0; c < group_size; ++c) {
        u[g * group_size + c] =
            static_cast<uint8_t>(std::clamp(std::nearbyint(x[c] / scale) + zero, 0.0f, 15.0f));
      }
    }
    PackInt4Row(u.data(), cols, packed + r * (cols / 2));
  }
}

}  // namespace baton::runtime
