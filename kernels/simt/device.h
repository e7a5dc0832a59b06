// The vocabulary CUDA kernel bodies (kernels/cuda/*.cuh) are written in, so that one body compiles
// under nvcc (the real kernel) and under a host compiler (run by the SIMT emulation, simt.h):
//   BATON_GLOBAL / BATON_DEVICE         __global__ / __device__ __forceinline__
//   BATON_UNROLL                        #pragma unroll (nothing on the host)
//   threadIdx, blockIdx, blockDim, gridDim, __syncthreads(), __syncwarp(),
//   __shfl_xor_sync(), __shfl_sync()    as in CUDA (full-warp masks only)
//   BATON_SHARED_ARRAY(type, name, n)   __shared__ type name[n]
//   BATON_DYNAMIC_SHARED(type, name)    extern __shared__ memory viewed as type* name
//   rsqrtf(), atomicAdd(float*)         as in CUDA
// Kernel bodies use only these, plain C++17 and <cmath> functions available on both sides.
#pragma once

#include "kernels/simt/launch_shape.h"

#if defined(__CUDACC__)

#define BATON_GLOBAL __global__
#define BATON_DEVICE __device__ __forceinline__
// Before a loop over a register array with a constant trip count: unrolled, the array's indices are
// constants and it stays in registers (indexed at run time, it would go to local memory).
#define BATON_UNROLL _Pragma("unroll")
#define BATON_SHARED_ARRAY(type, name, count) __shared__ type name[count]
#define BATON_DYNAMIC_SHARED(type, name)                               \
  extern __shared__ __align__(16) unsigned char baton_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(baton_dynamic_smem_)

#else  // host compiler: the SIMT emulation

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kernels/simt/simt.h"

#define BATON_GLOBAL inline
#define BATON_DEVICE inline
#define BATON_UNROLL
#define threadIdx (::baton::simt::internal::Current().thread_idx)
#define blockIdx (::baton::simt::internal::Current().block_idx)
#define blockDim (::baton::simt::internal::Current().block_dim)
#define gridDim (::baton::simt::internal::Current().grid_dim)
#define BATON_SHARED_ARRAY(type, name, count) \
  type* name = static_cast<type*>(            \
      ::baton::simt::internal::SharedArena(sizeof(type) * (count), alignof(type)))
#define BATON_DYNAMIC_SHARED(type, name) \
  type* name = static_cast<type*>(::baton::simt::internal::DynamicShared())

namespace baton::simt::internal {
inline void CheckFullMask(unsigned mask, int width) {
  if (mask != 0xffffffffu || width != kWarpSize) {
    std::fprintf(stderr, "simt: only full-warp masks and width are emulated\n");
    std::abort();
  }
}
}  // namespace baton::simt::internal

inline void __syncthreads() { ::baton::simt::internal::SyncThreads(); }

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::baton::simt::internal::CheckFullMask(mask, ::baton::simt::kWarpSize);
  ::baton::simt::internal::SyncWarp();
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = ::baton::simt::kWarpSize) {
  ::baton::simt::internal::CheckFullMask(mask, width);
  const int lane = ::baton::simt::internal::Current().linear_idx % ::baton::simt::kWarpSize;
  return ::baton::simt::internal::Shuffle(var, lane ^ lane_mask);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = ::baton::simt::kWarpSize) {
  ::baton::simt::internal::CheckFullMask(mask, width);
  return ::baton::simt::internal::Shuffle(var, src_lane % ::baton::simt::kWarpSize);
}

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

// Fibers never preempt each other, so a plain read-modify-write is atomic here.
inline float atomicAdd(float* address, float value) {
  const float old = *address;
  *address = old + value;
  return old;
}

#endif  // __CUDACC__

#include <cstdint>
#include <cstring>

namespace baton::simt {

// The f32 whose bits are `bits`.
BATON_DEVICE float BitsToFloat(uint32_t bits) {
#if defined(__CUDACC__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

BATON_DEVICE float Bf16BitsToFloat(uint16_t bits) { return BitsToFloat(uint32_t{bits} << 16); }

// The bits of the f32 `value`.
BATON_DEVICE uint32_t FloatToBits(float value) {
#if defined(__CUDACC__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

// f32 to bf16 bits, to nearest even, NaN kept quiet: the rounding of kernels/common/dtype.h's
// F32ToBf16, so the CPU and GPU paths store the same bits.
BATON_DEVICE uint16_t FloatToBf16Bits(float value) {
  uint32_t bits = FloatToBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE binary16 to f32, exact (subnormals, inf and NaN included).
BATON_DEVICE float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = (uint32_t{bits} & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// fp8 E4M3 to f32, exact: the code's magnitude bits shifted into an f16 give the value times 2^-8
// (subnormals included). The NaN codes (0x7F, 0xFF) read as +-480: loaders refuse them.
BATON_DEVICE float Fp8E4M3BitsToFloat(uint8_t code) {
  const uint16_t half = static_cast<uint16_t>(
      (static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(code))) << 7) & 0xBFFFu);
  return HalfBitsToFloat(half) * 256.0f;
}

// One warp's D = A B + C on tensor cores: A 16 x 16 and B 16 x 8 in bf16, C and D 16 x 8 in f32,
// each lane holding its fragments in the PTX ISA's mma.m16n8k16 layout (two bf16 per register, the
// lower-indexed element in the low half). Every lane of the warp must call it together.
BATON_DEVICE void MmaM16N8K16Bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                  const float c[4]) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  internal::MmaM16N8K16Bf16(d, a, b, c);
#endif
}

// Two bf16 bits in one register, `low` in the low half (the lower-indexed element of a fragment).
BATON_DEVICE uint32_t PackBf16(uint16_t low, uint16_t high) {
  return uint32_t{low} | (uint32_t{high} << 16);
}

}  // namespace baton::simt
