// Element types of weights and KV blocks, and scalar conversions between them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace baton {

// The quantized types are matmul weights only, never KV or activation types:
//   kI8: symmetric int8, one f32 scale per output row (MatmulParams::weight_scales);
//   kI4: 4-bit integers packed two to a byte, with a scale (and a zero point) per group of columns
//        (MatmulParams documents the packing);
//   kF8E4M3: OCP fp8 E4M3 ("E4M3FN": no infinities, 0x7F/0xFF are NaN, largest finite 448) with an
//        f32 scale per output row or per group of columns (MatmulParams).
enum class DType : uint8_t { kF32, kF16, kBF16, kI8, kI4, kF8E4M3 };

constexpr size_t DTypeBits(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 32;
    case DType::kF16:
    case DType::kBF16: return 16;
    case DType::kI8:
    case DType::kF8E4M3: return 8;
    case DType::kI4: return 4;
  }
  return 0;
}

// Bytes of one element, for the types of at least a byte; kI4 has no per-element size (use
// StorageBytes), and asking is a bug: 0 makes it show at once.
constexpr size_t DTypeBytes(DType dtype) { return dtype == DType::kI4 ? 0 : DTypeBits(dtype) / 8; }

// Bytes that `count` elements occupy, packed (two kI4 elements to a byte, rounded up).
constexpr size_t StorageBytes(DType dtype, int64_t count) {
  return (static_cast<size_t>(count) * DTypeBits(dtype) + 7) / 8;
}

constexpr std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI8: return "i8";
    case DType::kI4: return "i4";
    case DType::kF8E4M3: return "fp8";  // vLLM's name; E4M3 is the only fp8 Baton reads
  }
  return "?";
}

// True for the types whose stored values stand for value * scale.
constexpr bool IsQuantized(DType dtype) {
  return dtype == DType::kI8 || dtype == DType::kI4 || dtype == DType::kF8E4M3;
}

// The DType whose DTypeName is `name` ("f32", "f16", "bf16", "i8", "i4", "fp8"); nullopt for any
// other.
constexpr std::optional<DType> DTypeFromName(std::string_view name) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kI4, DType::kF8E4M3}) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return std::nullopt;
}

// The element types a paged KV cache holds (kernels/include/baton/kernels/paged_kv.h). Every layer
// asks here: the kernels, the pool, the engine, the deployment config and the command lines.
constexpr bool IsKvDType(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16; }

// The KV element type named `name` ("f32", "bf16"); nullopt for any other name.
constexpr std::optional<DType> KvDTypeFromName(std::string_view name) {
  const std::optional<DType> dtype = DTypeFromName(name);
  return dtype && IsKvDType(*dtype) ? dtype : std::nullopt;
}

// As above, and "auto" (vLLM's default): the weights' own dtype where a cache can hold it (bf16
// weights, a bf16 cache), bf16 for quantized weights (whose products take bf16 activations), f32
// otherwise (f32 or f16 weights).
constexpr std::optional<DType> KvDTypeFromName(std::string_view name, DType weight_dtype) {
  if (name == "auto") {
    if (IsQuantized(weight_dtype)) return DType::kBF16;
    return IsKvDType(weight_dtype) ? weight_dtype : DType::kF32;
  }
  return KvDTypeFromName(name);
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

// IEEE half as the compiler's own type: GCC >= 12's _Float16 (x86-64), which rounds correctly.
// Clang before 15 has _Float16 on x86-64 only with AVX512-FP16 (Debian 12's clang 14), so there
// it is __fp16, a storage type that converts through F16C's instructions (the top-level
// CMakeLists.txt adds -mf16c for that clang): the same rounding, bit for bit. Arrays of f16
// weights are HalfFloat arrays on either compiler.
#if defined(__FLT16_MAX__)
using HalfFloat = _Float16;
#else
using HalfFloat = __fp16;
#endif
static_assert(sizeof(HalfFloat) == 2);

inline float F16ToF32(uint16_t value) {
  HalfFloat half;
  std::memcpy(&half, &value, sizeof(half));
  return static_cast<float>(half);
}
inline uint16_t F32ToF16(float value) {
  const HalfFloat half = static_cast<HalfFloat>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, sizeof(bits));
  return bits;
}

// fp8 E4M3 (OCP "E4M3FN": sign, 4 exponent bits biased by 7, 3 mantissa bits; exponent 0 is
// subnormal, m * 2^-9; 0x7F and 0xFF are NaN, read here as NaN). Every value is exact in f32 and
// in bf16.
inline float Fp8E4M3ToF32(uint8_t value) {
  const int exponent = (value >> 3) & 0xF;
  const int mantissa = value & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) {
    magnitude = std::bit_cast<float>(0x7fc00000u);
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0x1p-9f;
  } else {
    // 2^(e - 7) * (1 + m / 8), built from its bits: an f32 exponent of e - 7 + 127.
    magnitude = std::bit_cast<float>(static_cast<uint32_t>(exponent + 120) << 23 |
                                     static_cast<uint32_t>(mantissa) << 20);
  }
  return (value & 0x80) != 0 ? -magnitude : magnitude;
}

// The nearest E4M3 value (ties to even). Magnitudes beyond the largest finite value, 448, saturate
// to +-448 (as the quantizers of vLLM and llm-compressor clamp before they cast); NaN gives 0x7F.
inline uint8_t F32ToFp8E4M3(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return 0x7F;
  const float magnitude = std::bit_cast<float>(abs_bits);
  if (magnitude >= 0x1p-6f) {  // normal: round the f32 mantissa to 3 bits, carrying into the exponent
    const uint32_t rounded = abs_bits + 0x7FFFFu + ((abs_bits >> 20) & 1u);
    const uint32_t code = (rounded >> 20) - (120u << 3);
    return static_cast<uint8_t>(sign | (code > 0x7E ? 0x7E : code));  // 464 and up, inf
  }
  // Subnormal: multiples of 2^-9, rounded to nearest even (exact: magnitude * 2^9 < 8). 8 is the
  // smallest normal, whose code is 8 too.
  const float steps = magnitude * 0x1p9f;
  uint32_t q = static_cast<uint32_t>(steps);
  const float rest = steps - static_cast<float>(q);
  if (rest > 0.5f || (rest == 0.5f && (q & 1u) != 0)) ++q;
  return static_cast<uint8_t>(sign | q);
}

#endif  // !defined(__CUDACC__)

}  // namespace baton
