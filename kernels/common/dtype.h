// Element types of weights and KV blocks, and scalar conversions between them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace baton {

enum class DType : uint8_t { kF32, kF16, kBF16 };

constexpr size_t DTypeBytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

constexpr std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

// The scalar conversions below need C++20 and _Float16, which nvcc's C++17 front end lacks; CUDA
// translation units (which include this header for DType only) convert with kernels/simt/device.h.
#if !defined(__CUDACC__)

// bf16 is the top half of an f32; rounding to nearest even, NaN kept quiet.
inline uint16_t F32ToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float Bf16ToF32(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}

// IEEE half through the compiler's _Float16 (GCC >= 12 on x86-64), which rounds correctly.
inline float F16ToF32(uint16_t value) { return static_cast<float>(std::bit_cast<_Float16>(value)); }
inline uint16_t F32ToF16(float value) { return std::bit_cast<uint16_t>(static_cast<_Float16>(value)); }

#endif  // !defined(__CUDACC__)

}  // namespace baton
