// Dense layer: out = in * weight^T (+ bias), weight in Hugging Face nn.Linear layout [n, k].
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/common/dtype.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct MatmulParams {
  float* out;          // [m, n]; must not overlap the inputs
  const float* in;     // [m, k]
  const void* weight;  // [n, k] row-major in weight_dtype
  DType weight_dtype;  // kF32, kBF16, kF16, kI8, kI4 or kF8E4M3
  const float* bias;   // [n] or nullptr
  int m;
  int n;
  int k;
  // Quantized weights only (else nullptr), f32:
  //   kI8: [n], row j of the weight is weight_scales[j] * q[j, :];
  //   kI4: [n, k / weight_group_size], see below;
  //   kF8E4M3: [n] when weight_group_size is 0 (per output row: per-channel checkpoints, and
  //     per-tensor ones with the one scale repeated), else [n, k / weight_group_size] (a multiple
  //     of kFp8GroupColumns dividing k; block-wise checkpoints' 128 x 128 blocks, one scale per
  //     row and 128 columns): weight[j, c] = scale[j, c / g] * fp8(q[j, c]), `weight` [n, k] bytes.
  const float* weight_scales = nullptr;
  // kI4 only (W4A16, groups of weight_group_size columns). `weight` is [n, k / 2] bytes: within
  // each run of 32 columns of a row, byte b (b < 16) holds column b in its low nibble and column
  // b + 16 in its high nibble (llama.cpp's Q4_0 order: one 16-byte load unpacks into two runs of
  // 16 consecutive columns). A nibble is an unsigned u in [0, 15], and
  //   weight[j, c] = weight_scales[j * G + c / g] * (u - zero),  g = weight_group_size, G = k / g,
  // zero = weight_zeros[j * G + c / g] ([n, G] f32), or 8 when weight_zeros is nullptr (symmetric
  // int4). g is a multiple of 32 that divides k.
  const float* weight_zeros = nullptr;
  int weight_group_size = 0;
};

// The column granularity of kI4 weights: group sizes, and so k, are multiples of this.
inline constexpr int kInt4ColumnBlock = 32;
// kF8E4M3 group sizes (when not 0) are multiples of this.
inline constexpr int kFp8GroupColumns = 32;

// Checks pointers (in/out may be null only when m == 0), sizes, the weight dtype, and that scales
// (and for kI4 the group size and optional zeros, for kF8E4M3 the optional group size) come with
// quantized weights and only with them.
absl::Status Validate(const MatmulParams& params);

// The most rows the device's int8 GEMV takes (decode batches); larger products go through a GEMM.
inline constexpr int kMatmulInt8GemvMaxRows = 8;
// Validate, and the int8 GEMV's own terms: int8 weights, m <= kMatmulInt8GemvMaxRows.
absl::Status ValidateInt8Gemv(const MatmulParams& params);
// The same for the device's int4 GEMV: int4 weights, m <= kMatmulInt4GemvMaxRows.
inline constexpr int kMatmulInt4GemvMaxRows = 8;
absl::Status ValidateInt4Gemv(const MatmulParams& params);
// The same for the device's fp8 GEMV: fp8 weights, m <= kMatmulFp8GemvMaxRows.
inline constexpr int kMatmulFp8GemvMaxRows = 8;
absl::Status ValidateFp8Gemv(const MatmulParams& params);

// Validates, then computes. f32 weights: OpenBLAS sgemm for large m, a SIMD GEMV (AVX-512 or AVX2) for small m,
// columns split over `pool` (which may be nullptr); OpenBLAS is set to one thread on first use.
// bf16 weights: the activations are rounded to bf16 (nearest even) once per call and the products
// and sums are f32, on every CPU: an AVX512_BF16 kernel when the CPU has it, otherwise weights
// widened to f32 (on the fly for small m, by panels into sgemm for large m). So a bf16 result equals the f32-weight result of (bf16(in), weight) up to f32
// summation order.
// f16 (IEEE half) weights: what a GPU f16 GEMM (cuBLAS, f16 inputs, f32 accumulation) computes:
// the activations are rounded to f16 once per call, correctly (nearest even; beyond +-65504 they
// become +-inf, subnormal f16 kept), the weights widened exactly to f32, products and sums in f32.
// The widening is F16C's (AVX-512 or AVX2) inside the GEMV for small m, by panels into sgemm for
// large m. So an f16 result equals the f32-weight result of (f16(in), weight) up to f32 summation
// order.
// int8 weights (W8A16, per output channel): the activations are rounded to bf16 as for bf16
// weights, the products and sums are f32, and each column's sum is multiplied by its scale:
// out[i, j] = scale[j] * sum_l bf16(in[i, l]) * q[j, l] + bias[j]. bf16(x) * q is exact in f32,
// so the result is the f32-weight result of (bf16(in), q) times the scale, up to summation order.
// Small m streams the int8 rows, widened in registers (a byte per weight read instead of two);
// large m widens panels of rows (exactly) to bf16 for the AVX512_BF16 kernel, or to f32 for sgemm.
// int4 weights (W4A16 in groups): for m <= 16 (decode) the activations are quantized to int8, one
// scale per row and weight group (max |x| / 127, llama.cpp's Q8_0 scheme at the group's size),
// the nibbles times the int8 activations summed exactly per group, then scaled:
// out[i, j] = sum_g scale[j, g] * (d[i, g] * dot - zero[j, g] * d[i, g] * sum_g(q_a)) + bias[j].
// For larger m (prefill) the activations are rounded to bf16 and the weights dequantized to bf16
// (AVX512_BF16 CPUs) or f32 panels: the dequantized weights' product up to that rounding.
// fp8 weights (W8A16, E4M3): for m <= 16 the activations are rounded to bf16 and the fp8 values
// widened exactly in registers (AVX-512 or AVX2 through F16C, scalar in the portable twin; bf16
// dpbf16 tiles for batches of per-row-scaled weights on AVX512_BF16 CPUs), each group's (or
// row's) f32 sum multiplied by its scale:
// out[i, j] = sum_g scale[j, g] * sum_{c in g} bf16(in[i, c]) * fp8(q[j, c]) + bias[j].
// Larger m dequantizes panels (scale * fp8, rounded to bf16 for the AVX512_BF16 kernel or kept f32
// for sgemm), as for int4.
absl::Status MatmulCpu(const MatmulParams& params, ThreadPool* pool);

// Several products that share `in`, m, k and the weight dtype (e.g. the Q, K and V projections of
// a layer), with the results of MatmulCpu on each. For small m (decode) they run as one pass over
// the pool, each thread streaming its share of the weights' rows taken back to back, so a decode
// step pays one dispatch and one barrier per group instead of per weight.
absl::Status MatmulGroupCpu(absl::Span<const MatmulParams> group, ThreadPool* pool);

}  // namespace baton::kernels
