// Internal pieces of MatmulCpu, split by the instruction set they are compiled for. All compute
// out[i, j] (+)= in[i, :] . w[j, :] for i < m, j in [n_begin, n_end); w is [n, k] row-major.
#pragma once

#include <cstdint>

#include "absl/types/span.h"
#include "baton/kernels/matmul.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels::internal {

// True when the CPU executes AVX512_BF16 (and AVX512BW/VL) instructions.
bool CpuHasAvx512Bf16();

// The largest m for which f32 products go through the GEMV, whose values of a row do not depend on
// m (sgemm, above it, gives no such guarantee): 64 when the kernels are built for AVX-512, else 16.
int F32GemvMaxRows();

// bf16 x bf16 with f32 accumulation through _mm512_dpbf16_ps. `a` is [m, a_stride] bf16 with
// a_stride >= k a multiple of 32 and zeros in [k, a_stride). Call only if CpuHasAvx512Bf16().
// out[i, j] = dot + (bias ? bias[j] : 0), out is [m, out_stride].
void MatmulBf16Avx512(const uint16_t* a, int64_t a_stride, const uint16_t* w, const float* bias,
                      float* out, int64_t out_stride, int m, int n_begin, int n_end, int k);

// int8 weights x bf16 activations (matmul_int8_avx512.cc), `a` as in MatmulBf16Avx512:
// out[i, j] = a[i, :] . q[j, :], the raw sums (no scale, no bias). Call only if CpuHasAvx512Bf16().
void MatmulInt8Avx512(const uint16_t* a, int64_t a_stride, const int8_t* w, float* out,
                      int64_t out_stride, int m, int n_begin, int n_end, int k);
// The same with fp8 E4M3 codes (matmul_int8_avx512.cc): out[i, j] = 2^-8 * a[i, :] . fp8(q[j, :]),
// the raw sums times 2^-8 (the kernel widens the codes through f16). Call only if
// CpuHasAvx512Bf16().
void MatmulFp8Avx512(const uint16_t* a, int64_t a_stride, const uint8_t* w, float* out,
                     int64_t out_stride, int m, int n_begin, int n_end, int k);
// out[i] = fp8(codes[i]) * 2^-8 as bf16 bits (exact). Call only if CpuHasAvx512Bf16().
void WidenFp8ToBf16(const uint8_t* codes, int64_t n, uint16_t* out);
// out[i] = q[i] as bf16 bits (exact). Call only if CpuHasAvx512Bf16().
void WidenInt8ToBf16(const int8_t* q, int64_t n, uint16_t* out);

// int4 weights (matmul_int4_cpu.cc; p.weight_dtype is kI4, p valid).
//
// A decode batch's activations as the int4 GEMV takes them: int8 with one scale per row and group.
struct Int4Activations {
  const int8_t* q;      // [m, k], |q| <= 127
  const float* scales;  // [m, k / group_size]: activation (i, c) is about scales[i, c / g] * q
  const float* sums;    // [m, k / group_size]: scales[i, g] * the sum of q over group g
};
// Quantizes in ([m, k]) per row and group of group_size columns: scale = max |x| / 127 (1 for a
// group of zeros), q = round-half-to-even(x / scale); fills the arrays of Int4Activations.
void Int4QuantizeActivations(const float* in, int m, int k, int group_size, int8_t* q,
                             float* scales, float* sums);
// The instructions the int4 GEMV sums with; every one gives the same int32 group sums.
enum class Int4GemvIsa { kPortable, kAvx2, kAvx512Vnni };
// AVX512_VNNI when the CPU has it, else AVX2 when the build does, else portable.
Int4GemvIsa BestInt4GemvIsa();
// True when the CPU executes AVX512_VNNI (and AVX512BW/VL) instructions.
bool CpuHasAvx512Vnni();
// out[i, j] (+ bias) for i < p.m, j in [n_begin, n_end), into p.out, from `a` (p.in quantized by
// Int4QuantizeActivations with p.weight_group_size), as matmul_int4_tile.h says.
void Int4GemvColumns(const MatmulParams& p, const Int4Activations& a, int n_begin, int n_end,
                     Int4GemvIsa isa);
// Int4GemvColumns with AVX512_VNNI (matmul_int4_vnni.cc). Call only if CpuHasAvx512Vnni().
void Int4GemvVnni(const MatmulParams& p, const Int4Activations& a, int n_begin, int n_end);
// Rows [j_begin, j_end) of the weights dequantized to f32 into out ([j_end - j_begin, k]).
void DequantizeInt4Rows(const MatmulParams& p, int j_begin, int j_end, float* out);

// Byte-per-weight formats (matmul_byte_gemv_cpu.cc; p.weight_dtype is kI8 or kF8E4M3, p valid).
//
// out[i, j] (scaled, + bias) for i < p.m, j in [n_begin, n_end), into p.out, from `rounded_in`
// (p.in rounded to bf16, [m, k] f32): the SIMD GEMV (AVX-512, or AVX2 + F16C, as built) when
// `simd`, else the scalar twin.
void ByteGemvColumns(const MatmulParams& p, const float* rounded_in, int n_begin, int n_end,
                     bool simd);
// fp8 weights: rows [j_begin, j_end) dequantized to f32 into out ([j_end - j_begin, k]).
void DequantizeFp8Rows(const MatmulParams& p, int j_begin, int j_end, float* out);

// The bf16 path for CPUs without AVX512_BF16 (exposed so tests cover it on any CPU): activations
// rounded to bf16, weights widened to f32, f32 products. `group` is as in MatmulGroupCpu: valid,
// bf16, sharing in, m and k.
void MatmulBf16Portable(absl::Span<const MatmulParams> group, ThreadPool* pool);

// The f16 path with scalar conversions and no SIMD GEMV (the twin of the F16C one, exposed so tests
// compare the two): activations rounded to f16, weights widened to f32, f32 products. `group` as
// above, f16.
void MatmulF16Portable(absl::Span<const MatmulParams> group, ThreadPool* pool);

// The int8 path with scalar widening and no SIMD GEMV, and sgemm for large m whatever the CPU
// (the twin of the fast one, exposed so tests compare the two). `group` as above, i8.
void MatmulInt8Portable(absl::Span<const MatmulParams> group, ThreadPool* pool);

// The int4 path with the scalar GEMV, and sgemm for large m whatever the CPU. `group` as above, i4
// with one group size.
void MatmulInt4Portable(absl::Span<const MatmulParams> group, ThreadPool* pool);

// The fp8 path with the scalar GEMV, and sgemm for large m whatever the CPU. `group` as above, fp8
// with one group size.
void MatmulFp8Portable(absl::Span<const MatmulParams> group, ThreadPool* pool);

}  // namespace baton::kernels::internal
