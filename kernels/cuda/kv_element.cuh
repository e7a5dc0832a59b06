// The paged KV cache's elements (paged_kv.h) as the kernel bodies read and write them: the kernels
// are templates on T, float for an f32 cache and uint16_t (the bits) for bf16, so the arithmetic is
// f32 either way: bf16 widens exactly on load and rounds to nearest even on store.
#pragma once

#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

BATON_DEVICE float LoadKv(const float* x) { return *x; }
BATON_DEVICE float LoadKv(const uint16_t* x) { return simt::Bf16BitsToFloat(*x); }
BATON_DEVICE void StoreKv(float* x, float value) { *x = value; }
BATON_DEVICE void StoreKv(uint16_t* x, float value) { *x = simt::FloatToBf16Bits(value); }

// Calls fn(T{}) with T the element type of a cache of `dtype` (kF32 or kBF16, as validated), for
// the launchers: `[&](auto element) { Kernel<decltype(element)><<<...>>>(params); }`.
template <typename Fn>
void ForKvElement(DType dtype, Fn&& fn) {
  if (dtype == DType::kBF16) {
    fn(uint16_t{});
  } else {
    fn(float{});
  }
}

}  // namespace baton::kernels::cuda_detail
