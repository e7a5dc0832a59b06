// The int4 (W4A16) pieces of MatmulCpu; matmul_cpu.cc picks between them. Weights stay packed two
// to a byte (matmul.h gives the order) and are unpacked in registers, never stored wider, except
// in the L2-sized panels a prefill-sized product multiplies.
//
// Decode sizes: int8 activations and integer dot products (matmul_int4_tile.h): AVX512_VNNI's
// vpdpbusd where the CPU has it (matmul_int4_vnni.cc), AVX2's vpmaddubsw + vpmaddwd otherwise,
// scalar in the portable twin; all three sum each group exactly, so they differ only in the order
// of the f32 sums across groups.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "baton/kernels/matmul.h"
#include "kernels/cpu/matmul_int4_tile.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd.h"

namespace baton::kernels::internal {

namespace {

constexpr int kBlock = kInt4ColumnBlock;  // 32 columns in 16 bytes
constexpr int kHalfBlock = kBlock / 2;

// The nibble of column c (< kBlock) in a block's 16 bytes.
inline int Nibble(const uint8_t* block, int c) {
  return c < kHalfBlock ? block[c] & 0xF : block[c - kHalfBlock] >> 4;
}

// One scalar at a time: the twin every vector Isa must agree with.
struct PortableIsa {
  static constexpr int kGroupColumns = 1;
  struct Weights {
    uint8_t u[kBlock];
  };
  using Acc = int32_t;
  using Sum = float;
  static Weights Unpack(const uint8_t* block) {
    Weights w;
    for (int c = 0; c < kBlock; ++c) w.u[c] = static_cast<uint8_t>(Nibble(block, c));
    return w;
  }
  static Acc Zero() { return 0; }
  static Acc Dot(Acc acc, const Weights& w, const int8_t* a) {
    for (int c = 0; c < kBlock; ++c) acc += w.u[c] * a[c];
    return acc;
  }
  static Sum SumZero() { return 0.0f; }
  static Sum Scaled(Acc acc, float scale, Sum total) { return total + static_cast<float>(acc) * scale; }
  static float Reduce(Sum total) { return total; }
};

#if defined(__AVX2__) && defined(__FMA__)
#define BATON_INT4_AVX2 1
// vpmaddubsw multiplies unsigned bytes (the nibbles) by signed ones (the activations) into pairs
// summed as int16 (at most 2 * 15 * 127: no saturation), vpmaddwd by ones widens them to int32.
struct Avx2Isa : Int4YmmIsa {
  static constexpr int kGroupColumns = 1;  // 16 registers
  static Acc Dot(Acc acc, Weights w, const int8_t* a) {
    const __m256i pairs =
        _mm256_maddubs_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};
#endif

}  // namespace

void Int4QuantizeActivations(const float* in, int m, int k, int group_size, int8_t* q,
                             float* scales, float* sums) {
  const int groups = k / group_size;
  for (int64_t i = 0; i < m; ++i) {
    for (int gi = 0; gi < groups; ++gi) {
      const int64_t begin = i * k + int64_t{gi} * group_size;
      float max_abs = 0.0f;
      for (int c = 0; c < group_size; ++c) max_abs = std::max(max_abs, std::fabs(in[begin + c]));
      const float scale = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
      int32_t sum = 0;
      for (int c = 0; c < group_size; ++c) {
        const float v = std::clamp(std::nearbyint(in[begin + c] / scale), -127.0f, 127.0f);
        q[begin + c] = static_cast<int8_t>(v);
        sum += q[begin + c];
      }
      scales[i * groups + gi] = scale;
      sums[i * groups + gi] = scale * static_cast<float>(sum);
    }
  }
}

Int4GemvIsa BestInt4GemvIsa() {
  if (CpuHasAvx512Vnni()) return Int4GemvIsa::kAvx512Vnni;
#if defined(BATON_INT4_AVX2)
  return Int4GemvIsa::kAvx2;
#else
  return Int4GemvIsa::kPortable;
#endif
}

void Int4GemvColumns(const MatmulParams& p, const Int4Activations& a, int n_begin, int n_end,
                     Int4GemvIsa isa) {
  switch (isa) {
    case Int4GemvIsa::kAvx512Vnni:
      Int4GemvVnni(p, a, n_begin, n_end);
      return;
    case Int4GemvIsa::kAvx2:
#if defined(BATON_INT4_AVX2)
      Int4Gemv<Avx2Isa>(p, a, n_begin, n_end);
      return;
#endif
    case Int4GemvIsa::kPortable:
      break;
  }
  Int4Gemv<PortableIsa>(p, a, n_begin, n_end);
}

void DequantizeInt4Rows(const MatmulParams& p, int j_begin, int j_end, float* out) {
  const int g = p.weight_group_size;
  const int64_t groups = p.k / g;
  for (int j = j_begin; j < j_end; ++j) {
    const auto* bytes = static_cast<const uint8_t*>(p.weight) + int64_t{j} * (p.k / 2);
    float* dst = out + int64_t{j - j_begin} * p.k;
    for (int64_t c = 0; c < p.k; c += kBlock) {
      const int64_t gi = j * groups + c / g;
      const float scale = p.weight_scales[gi];
      const float zero = p.weight_zeros != nullptr ? p.weight_zeros[gi] : 8.0f;
      const uint8_t* block = bytes + c / 2;
      for (int l = 0; l < kBlock; ++l) dst[c + l] = scale * (static_cast<float>(Nibble(block, l)) - zero);
    }
  }
}

}  // namespace baton::kernels::internal
