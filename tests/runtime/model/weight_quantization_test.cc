#include "runtime/model/weight_quantization.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;

TEST(QuantizeRowsInt8Test, ScaleIsTheRowsMaxOver127AndHalvesRoundToEven) {
  // Row 0: max 127, scale 1: 2.5 -> 2 and 3.5 -> 4 (half to even), -0.4 -> 0, -127 -> -127.
  // Row 1: max 254, scale 2: 3 -> 1.5 -> 2, 5 -> 2.5 -> 2, -1 -> -0.5 -> -0.
  // Row 2: zeros, scale 1 (so that dividing by it is defined), integers 0.
  const std::vector<float> w = {127, 2.5f, 3.5f, -0.4f, -127,  //
                                254, 3, 5, -1, -254,           //
                                0, 0, 0, 0, 0};
  std::vector<int8_t> q(w.size());
  std::vector<float> scales(3);
  QuantizeRowsInt8(w.data(), 3, 5, q.data(), scales.data());
  EXPECT_THAT(scales, ElementsAre(1.0f, 2.0f, 1.0f));
  EXPECT_THAT(q, ElementsAre(127, 2, 4, 0, -127,  //
                             127, 2, 2, 0, -127,  //
                             0, 0, 0, 0, 0));
}

TEST(QuantizeRowsInt8Test, DequantizedValuesAreWithinHalfAStep) {
  std::vector<float> w(64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i * 37 % 101) - 0.5f;
  std::vector<int8_t> q(w.size());
  float scale = 0;
  QuantizeRowsInt8(w.data(), 1, 64, q.data(), &scale);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_LE(std::abs(q[i] * scale - w[i]), scale / 2 * (1 + 1e-6f)) << i;
  }
}

}  // namespace
}  // namespace baton::runtime
