// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3" (SC'11), the one cuRAND and PyTorch use. A pure function of (counter, key): the n-th
// number of a stream is computed directly, with no state to carry from one draw, one thread or
// one process to the next. Header-only and valid on host and device (host_device.h), so the CPU
// sampler and the CUDA sampling kernel derive the same bits from the same (seed, draw index).
// Checked against Random123's published known-answer vectors (tests/kernels/philox_test.cc).
#pragma once

#include <cstdint>

#include "baton/kernels/host_device.h"

namespace baton::kernels {

struct Philox4x32 {
  uint32_t v[4];
};

namespace philox_detail {

inline constexpr uint32_t kMultiplier0 = 0xD2511F53u;
inline constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

BATON_HOST_DEVICE inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = uint64_t{a} * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

}  // namespace philox_detail

// Ten rounds; the key is bumped by the Weyl constants between rounds (Random123's philox4x32_R).
BATON_HOST_DEVICE inline Philox4x32 Philox4x32_10(Philox4x32 counter, uint32_t key0,
                                                  uint32_t key1) {
  using namespace philox_detail;
  uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kMultiplier0, c0, &hi0, &lo0);
    MulHiLo(kMultiplier1, c2, &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ key0;
    const uint32_t n2 = hi0 ^ c3 ^ key1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return {{c0, c1, c2, c3}};
}

// The sampler's random stream: draw `draw_idx` of stream `seed` is 24 uniform bits, the top 24 of
// the first word of Philox4x32-10 with key = seed (low word first) and counter = (draw_idx low
// word, draw_idx high word, 0, 0). As a float, Uniform24() * 2^-24 is uniform on [0, 1) with every
// value exactly representable (24 bits fit a float's significand). The other three words are left
// unused on purpose: one draw per counter keeps the n-th draw a function of (seed, n) alone.
BATON_HOST_DEVICE inline uint32_t SamplerBits24(uint64_t seed, uint64_t draw_idx) {
  const Philox4x32 counter = {{static_cast<uint32_t>(draw_idx),
                               static_cast<uint32_t>(draw_idx >> 32), 0u, 0u}};
  return Philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32))
             .v[0] >>
         8;
}

}  // namespace baton::kernels
