#include "runtime/model/weight_quantization.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/dtype.h"

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

TEST(QuantizeRowsFp8Test, ScaleIsTheRowsMaxOver448AndValuesRoundToTheNearestCode) {
  // Row 0: max 448, scale 1: each value is its nearest E4M3 (ties to even); 448 is code 0x7E.
  // Row 1: max 896, scale 2: the same values doubled give the same codes.
  // Row 2: zeros, scale 1, codes 0.
  const std::vector<float> w = {448, 1.0625f, 0.3f, -17, 0.00146484375f,  //
                                896, 2.125f, 0.6f, -34, 0.0029296875f,    //
                                0, 0, 0, 0, 0};
  std::vector<uint8_t> q(w.size());
  std::vector<float> scales(3);
  QuantizeRowsFp8(w.data(), 3, 5, q.data(), scales.data());
  EXPECT_THAT(scales, ElementsAre(1.0f, 2.0f, 1.0f));
  // 1.0625 lies halfway between 1 (0x38) and 1.125 (0x39): to the even code. 0.3 -> 0.3125 (0x2A).
  // -17, halfway between 16 (0x58) and 18: -16 (0x80 | 0x58). 0.00146484375 = 0.75 * 2^-9: the
  // subnormal 2^-9 (0x01).
  EXPECT_THAT(q, ElementsAre(0x7E, 0x38, 0x2A, 0xD8, 0x01,  //
                             0x7E, 0x38, 0x2A, 0xD8, 0x01,  //
                             0, 0, 0, 0, 0));
}

TEST(QuantizeRowsFp8Test, DequantizedValuesAreWithinHalfAStepOfTheirBinade) {
  std::vector<float> w(256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.013f * static_cast<float>(i * 37 % 101) - 0.6f;
  std::vector<uint8_t> q(w.size());
  float scale = 0;
  QuantizeRowsFp8(w.data(), 1, 256, q.data(), &scale);
  for (size_t i = 0; i < w.size(); ++i) {
    const float value = Fp8E4M3ToF32(q[i]) * scale;
    // 3 mantissa bits: within 2^-4 of the value, or half the smallest subnormal step.
    EXPECT_LE(std::abs(value - w[i]), std::max(std::abs(w[i]) / 16, scale * 0x1p-10f)) << i;
  }
}

// Unpacks column c of a row packed by PackInt4Row (MatmulParams' kI4 order).
int NibbleAt(const std::vector<uint8_t>& packed, int64_t row_bytes, int64_t r, int64_t c) {
  const uint8_t byte = packed[r * row_bytes + c / 32 * 16 + c % 16];
  return c % 32 < 16 ? byte & 0xF : byte >> 4;
}

TEST(PackInt4RowTest, ByteBHoldsColumnBLowAndColumnBPlus16High) {
  std::vector<uint8_t> u(64);
  for (int c = 0; c < 64; ++c) u[c] = static_cast<uint8_t>((c * 5 + c / 32) % 16);
  std::vector<uint8_t> packed(32);
  PackInt4Row(u.data(), 64, packed.data());
  EXPECT_EQ(packed[0], u[0] | (u[16] << 4));
  EXPECT_EQ(packed[15], u[15] | (u[31] << 4));
  EXPECT_EQ(packed[16], u[32] | (u[48] << 4));
  for (int c = 0; c < 64; ++c) EXPECT_EQ(NibbleAt(packed, 32, 0, c), u[c]) << c;
}

TEST(Int4GroupSizeTest, PrefersAwqsDefaultThenSmallerGroups) {
  EXPECT_EQ(Int4GroupSize(4096), 128);
  EXPECT_EQ(Int4GroupSize(192), 64);
  EXPECT_EQ(Int4GroupSize(96), 32);
  EXPECT_EQ(Int4GroupSize(100), 0);
}

// One group of 32 per row: row 0 spans [-1.5, 6] (scale 0.5, zero 3), row 1 is all positive (the
// range still starts at 0: scale 2/15, zero 0), row 2 is zeros (scale 1, zero 0).
TEST(QuantizeRowsInt4Test, ScaleAndZeroFollowAwqWithZeroInTheRange) {
  std::vector<float> w(3 * 32, 0.0f);
  for (int c = 0; c < 32; ++c) w[c] = -1.5f + 7.5f * static_cast<float>(c) / 31;
  for (int c = 0; c < 32; ++c) w[32 + c] = 1.0f + static_cast<float>(c) / 31;
  w[2] = 0.25f;  // 0.5 steps from -1.5: 0.25 / 0.5 = 0.5 -> 0 (half to even), + zero 3 = 3
  w[3] = 0.75f;  // 1.5 -> 2, + 3 = 5
  std::vector<uint8_t> packed(3 * 16);
  std::vector<float> scales(3), zeros(3);
  QuantizeRowsInt4(w.data(), 3, 32, 32, packed.data(), scales.data(), zeros.data());
  EXPECT_FLOAT_EQ(scales[0], 0.5f);
  EXPECT_EQ(zeros[0], 3.0f);
  EXPECT_FLOAT_EQ(scales[1], 2.0f / 15);
  EXPECT_EQ(zeros[1], 0.0f);
  EXPECT_EQ(scales[2], 1.0f);
  EXPECT_EQ(NibbleAt(packed, 16, 0, 0), 0);   // -1.5
  EXPECT_EQ(NibbleAt(packed, 16, 0, 31), 15);  // 6
  EXPECT_EQ(NibbleAt(packed, 16, 0, 2), 3);
  EXPECT_EQ(NibbleAt(packed, 16, 0, 3), 5);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 32; ++c) {
      const float dequantized = scales[r] * (NibbleAt(packed, 16, r, c) - zeros[r]);
      EXPECT_LE(std::abs(dequantized - w[r * 32 + c]), scales[r] / 2 * (1 + 1e-5f)) << r << " " << c;
    }
  }
}

}  // namespace
}  // namespace baton::runtime
