#include "runtime/model/weight_quantization.h"

#include <algorithm>
#include <cmath>

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

}  // namespace baton::runtime
