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
//        (MatmulParams documents the packing).
enum class DType : uint8_t { kF32, kF16, kBF16, kI8, kI4 };

constexpr size_t DTypeBits(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 32;
    case DType::kF16:
    case DType::kBF16: return 16;
    case DType::kI8: return 8;
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
  }
  return "?";
}

// True for the types whose values are integers standing for value * scale.
constexpr bool IsQuantized(DType dtype) { return dtype == DType::kI8 || dtype == DType::kI4; }

// The DType whose DTypeName is `name` ("f32", "f16", "bf16", "i8", "i4"); nullopt for any other.
constexpr std::optional<DType> DTypeFromName(std::string_view name) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kI4}) {
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

#endif  // !defined(__CUDACC__)

}  // namespace baton
