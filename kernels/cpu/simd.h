// <immintrin.h> for the CPU kernels, and SimdF32: one f32 register of the widest vector ISA the
// translation unit is compiled for, so a register-tiled kernel is written once for AVX-512 and AVX2.
//
// GCC 12's AVX-512 headers build some intrinsics on _mm512_undefined_ps(), which trips
// -Wuninitialized once inlined (GCC bug 105593, fixed in 12.3); the warnings point into the header,
// so silencing them around the include silences only those.
#pragma once

#if defined(__AVX512F__) || defined(__AVX2__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // GCC's own warning; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace baton::kernels::internal {

#if defined(__AVX512F__)
#define BATON_SIMD_F32 1
struct SimdF32 {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;
  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Set1(float x) { return _mm512_set1_ps(x); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
};
#elif defined(__AVX2__) && defined(__FMA__)
#define BATON_SIMD_F32 1
struct SimdF32 {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;
  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg Set1(float x) { return _mm256_set1_ps(x); }
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c
};
#endif

}  // namespace baton::kernels::internal
