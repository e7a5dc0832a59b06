// The int4 (W4A16) pieces of MatmulCpu; matmul_cpu.cc picks between them. Weights stay packed two
// to a byte (matmul.h gives the order) and are unpacked in registers, never stored wider, except
// in the L2-sized panels a prefill-sized product multiplies.
//
// A group's scale and zero point are constant along its columns, so the GEMV sums the raw nibbles
// times the activations per group and applies them once per group:
//   out[i, j] = sum_g scale[j, g] * (sum_{c in g} a[i, c] * u[j, c])  -  sum_g scale[j, g] *
//               zero[j, g] * (sum_{c in g} a[i, c])
// The second sum's activation sums are the same for every column, computed once per call: a
// column then costs one FMA per weight, as bf16 weights do, at a quarter of their bytes.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "baton/kernels/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd.h"

namespace baton::kernels::internal {

namespace {

constexpr int kBlock = kInt4ColumnBlock;  // 32 columns in 16 bytes
constexpr int kHalfBlock = kBlock / 2;

struct Int4Row {
  const uint8_t* bytes;  // [k / 2]
  const float* scales;   // [G]
  const float* zeros;    // [G], or nullptr: 8
};

Int4Row RowOf(const MatmulParams& p, int j) {
  const int64_t groups = p.k / p.weight_group_size;
  return Int4Row{static_cast<const uint8_t*>(p.weight) + int64_t{j} * (p.k / 2),
                 p.weight_scales + j * groups,
                 p.weight_zeros != nullptr ? p.weight_zeros + j * groups : nullptr};
}

float ZeroOf(const Int4Row& row, int64_t g) { return row.zeros != nullptr ? row.zeros[g] : 8.0f; }

// The nibble of column c (< kBlock) in a block's 16 bytes.
inline int Nibble(const uint8_t* block, int c) {
  return c < kHalfBlock ? block[c] & 0xF : block[c - kHalfBlock] >> 4;
}

#if defined(BATON_SIMD_F32)
constexpr int kRegsPerBlock = kBlock / SimdF32::kLanes;  // 2 (AVX-512) or 4 (AVX2)

// The 32 nibbles of a block as f32 (exact), columns in order.
inline void UnpackBlock(const uint8_t* block, SimdF32::Reg (&w)[kRegsPerBlock]) {
#if defined(__AVX512F__)
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
  w[0] = _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0xF)));
  w[1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
#else
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block));
  const __m128i low = _mm_and_si128(bytes, _mm_set1_epi8(0xF));
  const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0xF));
  w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(low));
  w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(low, 8)));
  w[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(high));
  w[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(high, 8)));
#endif
}

inline float ReduceAdd(SimdF32::Reg v) {
#if defined(__AVX512F__)
  return _mm512_reduce_add_ps(v);
#else
  const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 sum2 = _mm_add_ps(sum4, _mm_movehl_ps(sum4, sum4));
  return _mm_cvtss_f32(_mm_add_ss(sum2, _mm_movehdup_ps(sum2)));
#endif
}

// out[r, j] for r < MA: MA activation rows against weight row j, each block unpacked once.
template <int MA>
void Int4Tile(const MatmulParams& p, const float* a, const float* group_sums, int64_t out_stride,
              float* out, int j) {
  using S = SimdF32;
  const Int4Row row = RowOf(p, j);
  const int g = p.weight_group_size;
  const int64_t groups = p.k / g;
  S::Reg total[MA];
  float zero_terms[MA] = {};
  for (int r = 0; r < MA; ++r) total[r] = S::Zero();
  for (int64_t gi = 0; gi < groups; ++gi) {
    S::Reg acc[MA];
    for (int r = 0; r < MA; ++r) acc[r] = S::Zero();
    const int64_t c_end = (gi + 1) * g;
    for (int64_t c = gi * g; c < c_end; c += kBlock) {
      S::Reg w[kRegsPerBlock];
      UnpackBlock(row.bytes + c / 2, w);
      for (int r = 0; r < MA; ++r) {
        for (int v = 0; v < kRegsPerBlock; ++v) {
          acc[r] = S::Fma(S::Load(a + r * int64_t{p.k} + c + v * S::kLanes), w[v], acc[r]);
        }
      }
    }
    const float scale = row.scales[gi];
    const float zero_scale = ZeroOf(row, gi) * scale;
    for (int r = 0; r < MA; ++r) {
      total[r] = S::Fma(acc[r], S::Set1(scale), total[r]);
      zero_terms[r] += zero_scale * group_sums[r * groups + gi];
    }
  }
  const float b = p.bias != nullptr ? p.bias[j] : 0.0f;
  for (int r = 0; r < MA; ++r) out[r * out_stride + j] = ReduceAdd(total[r]) - zero_terms[r] + b;
}

constexpr int kRowGroup = 4;

void Int4GemvSimd(const MatmulParams& p, const float* a, const float* group_sums, int n_begin,
                  int n_end) {
  const int64_t groups = p.k / p.weight_group_size;
  for (int j = n_begin; j < n_end; ++j) {
    int i = 0;
    for (; i + kRowGroup <= p.m; i += kRowGroup) {
      Int4Tile<kRowGroup>(p, a + i * int64_t{p.k}, group_sums + i * groups, p.n, p.out + i * int64_t{p.n},
                          j);
    }
    const float* a_rest = a + i * int64_t{p.k};
    const float* sums_rest = group_sums + i * groups;
    float* out_rest = p.out + i * int64_t{p.n};
    switch (p.m - i) {
      case 1: Int4Tile<1>(p, a_rest, sums_rest, p.n, out_rest, j); break;
      case 2: Int4Tile<2>(p, a_rest, sums_rest, p.n, out_rest, j); break;
      case 3: Int4Tile<3>(p, a_rest, sums_rest, p.n, out_rest, j); break;
      default: break;
    }
  }
}
#endif  // BATON_SIMD_F32

// The same sums in the same grouping, one scalar at a time.
void Int4GemvPortable(const MatmulParams& p, const float* a, const float* group_sums, int n_begin,
                      int n_end) {
  const int g = p.weight_group_size;
  const int64_t groups = p.k / g;
  for (int j = n_begin; j < n_end; ++j) {
    const Int4Row row = RowOf(p, j);
    for (int i = 0; i < p.m; ++i) {
      const float* a_row = a + i * int64_t{p.k};
      float total = 0.0f;
      float zero_term = 0.0f;
      for (int64_t gi = 0; gi < groups; ++gi) {
        float acc = 0.0f;
        for (int64_t c = gi * g; c < (gi + 1) * g; c += kBlock) {
          const uint8_t* block = row.bytes + c / 2;
          for (int l = 0; l < kBlock; ++l) acc += a_row[c + l] * static_cast<float>(Nibble(block, l));
        }
        total += acc * row.scales[gi];
        zero_term += ZeroOf(row, gi) * row.scales[gi] * group_sums[i * groups + gi];
      }
      p.out[i * int64_t{p.n} + j] = total - zero_term + (p.bias != nullptr ? p.bias[j] : 0.0f);
    }
  }
}

}  // namespace

void Int4GroupSums(const float* a, int m, int k, int group_size, float* sums) {
  const int groups = k / group_size;
  for (int i = 0; i < m; ++i) {
    for (int gi = 0; gi < groups; ++gi) {
      const float* x = a + int64_t{i} * k + int64_t{gi} * group_size;
      float sum = 0.0f;
      for (int l = 0; l < group_size; ++l) sum += x[l];
      sums[int64_t{i} * groups + gi] = sum;
    }
  }
}

void Int4GemvColumns(const MatmulParams& p, const float* a, const float* group_sums, int n_begin,
                     int n_end, bool simd) {
#if defined(BATON_SIMD_F32)
  if (simd) {
    Int4GemvSimd(p, a, group_sums, n_begin, n_end);
    return;
  }
#endif
  (void)simd;
  Int4GemvPortable(p, a, group_sums, n_begin, n_end);
}

void DequantizeInt4Rows(const MatmulParams& p, int j_begin, int j_end, float* out) {
  const int g = p.weight_group_size;
  for (int j = j_begin; j < j_end; ++j) {
    const Int4Row row = RowOf(p, j);
    float* dst = out + int64_t{j - j_begin} * p.k;
    for (int64_t c = 0; c < p.k; c += kBlock) {
      const int64_t gi = c / g;
      const float scale = row.scales[gi];
      const float zero = ZeroOf(row, gi);
      const uint8_t* block = row.bytes + c / 2;
      for (int l = 0; l < kBlock; ++l) dst[c + l] = scale * (static_cast<float>(Nibble(block, l)) - zero);
    }
  }
}

}  // namespace baton::kernels::internal
