// The batched sampling op (device side: kernels/cuda/sample.cuh) and the exact arithmetic that it
// shares with the CPU sampler SampleToken (sampling.h), so that both pick the same token for the
// same logits, options, seed and draw index: bit for bit, not "up to rounding".
//
// Why exact: a token is picked by comparing a random target with a running sum of probabilities,
// and the top-p set by comparing a running sum with top_p. A float sum depends on its order (a
// block reduction on the GPU, a loop on the CPU), so two correct implementations would disagree
// whenever a comparison lands within rounding of the boundary. Here every weight is a fixed-point
// integer computed by the same few IEEE operations on both sides (explicit fmaf, no library exp),
// and every sum and comparison is integer, hence independent of order.
//
// The specification, for one row of logits l[0, vocab) with temperature T > 0:
//   - max = max(l); a token's weight is W(l_i) = SamplingWeight(l_i, max, 1/T): 2^40 for l_i ==
//     max, else floor(2^40 * e^((l_i - max) / T)) with e^x from SamplingExp (0 below e^-28,
//     where the weight would round to 0 anyway);
//   - tokens are ordered by logit, higher first, lower index first among equal logits (SampleKey);
//   - top_k (0 < top_k < vocab) keeps the first top_k in that order;
//   - top_p (< 1) then keeps the shortest prefix of the kept tokens, in that order, whose weight
//     sum reaches TopPTarget(top_p, kept weight sum);
//   - min_p (> 0) then keeps, of those, the tokens whose weight is >= MinPWeight(min_p): the weight
//     is the probability relative to the max's, so this is "p_i >= min_p * p_max" in fixed point,
//     and it does not matter that top-k/top-p ran first (the max's weight is 2^40 either way);
//   - u = SamplerBits24(seed, draw_idx) (philox.h); target = DrawTarget(u, kept sum), and the token
//     is the first kept one, in ascending index order, whose running weight sum exceeds target.
// Greedy (T == 0, or max == -inf): the first index of the max logit, and no draw.
#pragma once

#include <math.h>

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/host_device.h"

namespace baton::kernels {

struct SampleParams {
  const float* logits;         // [num_seqs, vocab_size]
  const float* temperature;    // [num_seqs]; 0 => greedy, else finite and > 0
  const int32_t* top_k;        // [num_seqs]; 0 => off
  const float* top_p;          // [num_seqs]; in (0, 1]; 1 => off
  const float* min_p;          // [num_seqs]; in [0, 1]; 0 => off; nullptr => off for every row
  const uint64_t* seed;        // [num_seqs]
  const uint64_t* draw_idx;    // [num_seqs]: which draw of the seed's stream (philox.h)
  int32_t* token_ids;          // [num_seqs] out; -1 for a row with a NaN logit
  float* logprobs;             // [num_seqs] out, or nullptr: log_softmax(logits row)[token], f32
  int num_seqs;
  int vocab_size;
};

// Checks pointers (null allowed only when num_seqs == 0; logprobs may always be null),
// num_seqs >= 0, vocab_size >= 1. The per-sequence options live in (possibly device) arrays and are
// not read here: callers validate them on the host (ValidateSamplingOptions in sampling.h). The
// kernel's answer to values that fail it is defined all the same: temperature not > 0 is greedy,
// top_k <= 0 is off, top_p >= 1 (or NaN) is off, min_p <= 0 (or NaN) is off, min_p > 1 keeps the
// max only.
absl::Status Validate(const SampleParams& params);

// Validates, then samples each row with SampleToken (sampling.h) at (seed[s], draw_idx[s]); a row
// with a NaN logit gets token -1 (and logprob NaN), as from the kernel. InvalidArgument for bad
// params or options that fail ValidateSamplingOptions. logprobs as TopLogprobs computes them
// (double accumulation; the kernel accumulates in f32).
absl::Status SampleCpu(const SampleParams& params);

namespace sample_detail {

inline constexpr int kWeightBits = 40;
inline constexpr uint64_t kWeightOne = uint64_t{1} << kWeightBits;

// Reinterprets bits without <cstring> or CUDA intrinsics, so both compilers see plain C++.
BATON_HOST_DEVICE inline uint32_t FloatBits(float x) {
  union {
    float f;
    uint32_t u;
  } pun = {x};
  return pun.u;
}
BATON_HOST_DEVICE inline float BitsFloat(uint32_t u) {
  union {
    uint32_t u;
    float f;
  } pun = {u};
  return pun.f;
}

}  // namespace sample_detail

// e^x for x in [-28, 0], else 0 for x < -28 (or -inf). Cephes' expf reduction and polynomial (as
// kernels/cpu/vec_math.h) written with explicit fmaf only, so that no compiler may contract or
// reorder it: every step is one correctly rounded IEEE operation, identical on CPU and GPU.
BATON_HOST_DEVICE inline float SamplingExp(float x) {
  if (!(x >= -28.0f)) return 0.0f;
  const float n = rintf(x * 1.44269504088896341f);  // in [-40, 0]
  float r = fmaf(-n, 0.693359375f, x);
  r = fmaf(-n, -2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r + 1.0f);
  // 2^n is exact in the exponent field; p * 2^n only shifts the exponent (p ~ 1, n >= -40).
  const uint32_t scale_bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return p * sample_detail::BitsFloat(scale_bits);
}

// The fixed-point weight of a token, in [0, 2^40]: see the specification above. `max_logit` is the
// row's max (not NaN), `inv_temperature` = 1.0f / temperature computed in f32.
BATON_HOST_DEVICE inline uint64_t SamplingWeight(float logit, float max_logit,
                                                 float inv_temperature) {
  if (logit == max_logit) return sample_detail::kWeightOne;  // also +inf == +inf
  const float x = (logit - max_logit) * inv_temperature;     // < 0 or -inf, never NaN
  // Scaling by a power of two is exact; the conversion truncates.
  return static_cast<uint64_t>(SamplingExp(x) * 0x1p40f);
}

// A key that orders logits as floats do, higher logit => larger key, with -0 and +0 equal. Not for
// NaN.
BATON_HOST_DEVICE inline uint32_t SampleKey(float logit) {
  const uint32_t bits = logit == 0.0f ? 0u : sample_detail::FloatBits(logit);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// The weight a top-p prefix must reach: ceil(top_p * total) in double, clamped to [1, total]
// (total >= 1). Double products and ceil are correctly rounded on both sides.
BATON_HOST_DEVICE inline uint64_t TopPTarget(float top_p, uint64_t total) {
  const double target = ceil(static_cast<double>(top_p) * static_cast<double>(total));
  if (!(target >= 1.0)) return 1;
  if (target >= static_cast<double>(total)) return total;
  return static_cast<uint64_t>(target);
}

// The least weight min_p keeps: ceil(min_p * 2^40), 0 (off) for min_p <= 0 or NaN, 2^40 for
// min_p >= 1. min_p * 2^40 is exact in double (a float times a power of two), so is the ceil.
BATON_HOST_DEVICE inline uint64_t MinPWeight(float min_p) {
  if (!(min_p > 0.0f)) return 0;
  if (min_p >= 1.0f) return sample_detail::kWeightOne;
  return static_cast<uint64_t>(ceil(static_cast<double>(min_p) * 0x1p40));
}

// floor(u24 * total / 2^24) exactly, in [0, total) for u24 < 2^24, without 128-bit arithmetic:
// total = hi * 2^24 + lo, so the product splits into hi * u24 + floor(lo * u24 / 2^24).
BATON_HOST_DEVICE inline uint64_t DrawTarget(uint32_t u24, uint64_t total) {
  return (total >> 24) * u24 + (((total & 0xFFFFFFu) * u24) >> 24);
}

}  // namespace baton::kernels
